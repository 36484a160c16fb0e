//! The workspace's layering, checked from `cargo metadata` and the crates'
//! own `lib.rs`: arrows point down only (core <- automata <- grammar <-
//! json-schema <- backends <- facade <- front ends), backends and devices
//! never depend on one another (but the `auto` backend, built on the two
//! engines, on those two only), and every library crate's manual names each
//! of its public modules.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Each workspace package's layer: a package may depend only on packages of
/// a lower layer.
fn layer(package: &str) -> Option<u32> {
    Some(match package {
        "tokensieve-core" => 0,
        "tokensieve-automata" => 1,
        "tokensieve-grammar" => 2,
        "tokensieve-json-schema" => 3,
        // Backends and devices: one layer, never depending on each other.
        "tokensieve-regex-fsm" | "tokensieve-earley" | "tokensieve-reasoner" => 4,
        "tokensieve-cuda" | "tokensieve-wgpu" => 4,
        // A backend made of the two engines (earley at once, regex-fsm's
        // table once built): above them, below the facade.
        "tokensieve-auto" => 5,
        "tokensieve" => 6,
        "tokensieve-cli" | "tokensieve-python" | "tokensieve-example-custom-backend" => 7,
        // Fuzz target bodies: the backends called directly, on top of all.
        "tokensieve-fuzz" => 7,
        _ => return None,
    })
}

/// The workspace's packages: name -> (manifest path, [(dependency, kind)]).
type Packages = BTreeMap<String, (String, Vec<(String, String)>)>;

fn workspace_packages() -> Packages {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut packages = Packages::new();
    for p in meta["packages"].as_array().expect("packages") {
        let deps = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| {
                d["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("tokensieve"))
            })
            .map(|d| {
                let kind = d["kind"].as_str().unwrap_or("normal").to_owned();
                (d["name"].as_str().unwrap().to_owned(), kind)
            })
            .collect();
        let name = p["name"].as_str().expect("name").to_owned();
        let manifest = p["manifest_path"].as_str().expect("manifest").to_owned();
        packages.insert(name, (manifest, deps));
    }
    packages
}

#[test]
fn every_package_has_a_layer_and_depends_only_downward() {
    let packages = workspace_packages();
    assert!(packages.contains_key("tokensieve-automata"), "{packages:?}");
    let mut wrong = Vec::new();
    for (name, (_, deps)) in &packages {
        let Some(mine) = layer(name) else {
            wrong.push(format!("{name} has no layer in tests/layers.rs"));
            continue;
        };
        for (dep, kind) in deps {
            let theirs = layer(dep).unwrap_or(u32::MAX);
            // Tests and benches may use what sits above (the facade's tests
            // run the example backend); what ships may not.
            if kind != "dev" && theirs >= mine {
                wrong.push(format!(
                    "{name} (layer {mine}) depends on {dep} (layer {theirs})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The one backend built on others: `auto` depends on earley and regex-fsm
/// (whose root APIs it uses), on no device and on no other backend.
#[test]
fn the_auto_backend_depends_on_the_two_engines_and_no_device() {
    let packages = workspace_packages();
    let (_, deps) = &packages["tokensieve-auto"];
    let shipped: Vec<&str> = deps
        .iter()
        .filter(|(_, kind)| kind != "dev")
        .map(|(d, _)| d.as_str())
        .collect();
    for engine in ["tokensieve-earley", "tokensieve-regex-fsm"] {
        assert!(
            shipped.contains(&engine),
            "auto is built on {engine}: {shipped:?}"
        );
    }
    for other in [
        "tokensieve-reasoner",
        "tokensieve-cuda",
        "tokensieve-wgpu",
        "tokensieve",
    ] {
        assert!(!shipped.contains(&other), "auto depends on {other}");
    }
}

#[test]
fn backends_and_devices_never_depend_on_each_other() {
    let packages = workspace_packages();
    let peers = [
        "tokensieve-regex-fsm",
        "tokensieve-earley",
        "tokensieve-reasoner",
        "tokensieve-cuda",
        "tokensieve-wgpu",
    ];
    for name in peers {
        let (_, deps) = &packages[name];
        for (dep, kind) in deps {
            assert!(
                !peers.contains(&dep.as_str()),
                "{name} depends on {dep} ({kind}): backends and devices build on the layers below only"
            );
        }
    }
}

/// A library crate's `lib.rs` is its manual: it names each public module
/// (as a doc link) in its crate docs.
#[test]
fn every_public_module_is_named_in_its_crates_manual() {
    let packages = workspace_packages();
    let mut unnamed = Vec::new();
    for (name, (manifest, _)) in &packages {
        let lib = Path::new(manifest).parent().unwrap().join("src/lib.rs");
        let Ok(text) = std::fs::read_to_string(&lib) else {
            continue; // a binary-only package
        };
        let docs: String = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut hidden = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[doc(hidden)]") {
                hidden = true;
                continue;
            }
            let module = line
                .strip_prefix("pub mod ")
                .and_then(|rest| rest.strip_suffix(';'));
            if let Some(module) = module
                && !hidden
                && !docs.contains(&format!("[`{module}`]"))
            {
                unnamed.push(format!("{name}: pub mod {module}"));
            }
            if !line.starts_with("#[") {
                hidden = false;
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "modules the crate docs do not name: {unnamed:#?}"
    );
}
