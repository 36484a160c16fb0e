//! Where a `$ref` leads that is more than a JSON pointer into the
//! document: an embedded resource (a sub-schema with an `$id` of its own,
//! draft 4's `id`) named by its URI, and an anchor (`$anchor`,
//! `$dynamicAnchor`, or an `$id` of the form `#name`) named within the
//! resource that declares it.
//!
//! URIs are resolved against their resource's base as RFC 3986 resolves a
//! reference (scheme, authority, path merge, dot segments); a document
//! without an `$id` has the empty base, against which a relative `$id`
//! stays as written. Nothing is fetched: a URI that names no resource of
//! the document is another document, which the caller refuses.

use hashbrown::HashMap;
use serde_json::Value;
use tokensieve_core::GrammarError;

use super::lower::push_pointer_token;

/// Keywords whose values are data, not schemas: nothing in them declares a
/// resource or an anchor.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Whether `root` declares draft 7 or older, where every keyword beside a
/// `$ref` is ignored, `$id` included.
pub(crate) fn ref_hides_id(root: &Value) -> bool {
    root.get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| {
            ["draft-03", "draft-04", "draft-06", "draft-07"]
                .iter()
                .any(|d| s.contains(d))
        })
}

/// The resources and anchors of one document.
#[derive(Debug)]
pub(crate) struct Resources {
    /// Each resource's JSON pointer and absolute URI (no fragment), the
    /// document itself first.
    resources: Vec<(String, String)>,
    /// A resource's index by its URI, and by its pointer.
    by_uri: HashMap<String, usize>,
    by_pointer: HashMap<String, usize>,
    /// (resource, anchor name) → the pointer of the sub-schema it names.
    anchors: HashMap<(usize, String), String>,
    /// Whether the document is draft 7 or older, where every keyword beside
    /// a `$ref` is ignored, `$id` included: such an `$id` neither names a
    /// resource nor changes the base its `$ref` resolves against.
    ref_hides_id: bool,
}

impl Resources {
    /// Every resource and anchor of `root`. An error where one resource
    /// declares an anchor twice or two resources have one URI (the
    /// schema then names two things alike).
    pub fn index(root: &Value) -> Result<Self, GrammarError> {
        let mut index = Resources {
            resources: vec![(String::new(), String::new())],
            by_uri: HashMap::new(),
            by_pointer: HashMap::new(),
            anchors: HashMap::new(),
            ref_hides_id: ref_hides_id(root),
        };
        let mut ptr = String::new();
        index.walk(root, &mut ptr, 0)?;
        for (i, (at, uri)) in index.resources.iter().enumerate() {
            index.by_pointer.insert(at.clone(), i);
            if let Some(other) = index.by_uri.insert(uri.clone(), i) {
                return Err(GrammarError::schema_at(
                    at.as_str(),
                    format!(
                        "`$id` {uri:?} is also the resource at {:?}",
                        index.resources[other].0
                    ),
                ));
            }
        }
        Ok(index)
    }

    fn walk(&mut self, v: &Value, ptr: &mut String, resource: usize) -> Result<(), GrammarError> {
        match v {
            Value::Object(map) => {
                let mut here = resource;
                let hidden = self.ref_hides_id && map.contains_key("$ref");
                let id = ["$id", "id"]
                    .iter()
                    .find_map(|k| map.get(*k).and_then(Value::as_str))
                    .filter(|_| !hidden);
                if let Some(id) = id {
                    let (uri, fragment) = id.split_once('#').unwrap_or((id, ""));
                    if !uri.is_empty() && ptr.is_empty() {
                        // The document's own URI.
                        self.resources[0].1 = join("", uri);
                    } else if !uri.is_empty() {
                        let absolute = join(&self.resources[resource].1, uri);
                        self.resources.push((ptr.clone(), absolute));
                        here = self.resources.len() - 1;
                    }
                    if !fragment.is_empty() && !fragment.starts_with('/') {
                        self.declare(here, fragment, ptr)?;
                    }
                }
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(name) = map.get(key).and_then(Value::as_str) {
                        self.declare(here, name, ptr)?;
                    }
                }
                for (key, child) in map {
                    if DATA_KEYWORDS.contains(&key.as_str()) {
                        continue;
                    }
                    let len = ptr.len();
                    ptr.push('/');
                    push_pointer_token(ptr, key);
                    self.walk(child, ptr, here)?;
                    ptr.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let len = ptr.len();
                    ptr.push('/');
                    ptr.push_str(&i.to_string());
                    self.walk(child, ptr, resource)?;
                    ptr.truncate(len);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Anchor `name` of `resource` at `ptr`. The same name twice in one
    /// resource is an error, but for `$anchor` and `$dynamicAnchor` of
    /// one sub-schema alike.
    fn declare(&mut self, resource: usize, name: &str, ptr: &str) -> Result<(), GrammarError> {
        match self.anchors.get(&(resource, name.to_string())) {
            Some(other) if other != ptr => Err(GrammarError::schema_at(
                ptr,
                format!("anchor {name:?} is declared twice in one resource (also at {other:?})"),
            )),
            Some(_) => Ok(()),
            None => {
                self.anchors
                    .insert((resource, name.to_string()), ptr.to_string());
                Ok(())
            }
        }
    }

    /// How many resources the document has (itself included).
    pub fn count(&self) -> usize {
        self.resources.len()
    }

    /// The innermost resource whose sub-schema holds the one at `ptr`.
    fn resource_at(&self, mut ptr: &str) -> usize {
        loop {
            if let Some(&i) = self.by_pointer.get(ptr) {
                return i;
            }
            match ptr.rfind('/') {
                Some(i) => ptr = &ptr[..i],
                None => return 0,
            }
        }
    }

    /// Where `reference`, written in the sub-schema at `ref_ptr`, leads:
    /// the pointer of the resource it names and the JSON pointer (decoded)
    /// to follow from there, or the pointer of the anchor it names and an
    /// empty one. `None` for a URI no resource of the document has; an
    /// error for an anchor its resource does not declare.
    pub fn find(
        &self,
        reference: &str,
        ref_ptr: &str,
    ) -> Result<Option<(String, String)>, GrammarError> {
        let here = self.resource_at(ref_ptr);
        let (uri, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let target = if uri.is_empty() {
            here
        } else {
            let absolute = join(&self.resources[here].1, uri);
            match self.by_uri.get(&absolute) {
                Some(&i) => i,
                None => return Ok(None),
            }
        };
        let fragment = super::lower::percent_decode(fragment);
        if fragment.is_empty() || fragment.starts_with('/') {
            return Ok(Some((self.resources[target].0.clone(), fragment)));
        }
        match self.anchors.get(&(target, fragment.clone())) {
            Some(at) => Ok(Some((at.clone(), String::new()))),
            None => Err(GrammarError::schema_at(
                ref_ptr,
                format!(
                    "`$ref` {reference:?} names anchor {fragment:?}, which its resource does not declare"
                ),
            )),
        }
    }
}

/// The length of `uri`'s scheme and its colon, if it has one.
fn scheme_len(uri: &str) -> Option<usize> {
    let colon = uri.find(':')?;
    let scheme = &uri[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(colon + 1)
}

/// The length of `uri`'s scheme and authority (`http://host`), where its
/// path starts.
fn origin_len(uri: &str) -> usize {
    let scheme = scheme_len(uri).unwrap_or(0);
    match uri[scheme..].strip_prefix("//") {
        Some(rest) => scheme + 2 + rest.find('/').unwrap_or(rest.len()),
        None => scheme,
    }
}

/// `reference` (no fragment) resolved against `base` (RFC 3986 §5.2).
pub(crate) fn join(base: &str, reference: &str) -> String {
    if scheme_len(reference).is_some() {
        return without_dot_segments(reference);
    }
    if reference.is_empty() {
        return base.to_string();
    }
    if reference.starts_with("//") {
        let scheme = scheme_len(base).unwrap_or(0);
        return format!("{}{}", &base[..scheme], without_dot_segments(reference));
    }
    let (origin, path) = base.split_at(origin_len(base));
    if reference.starts_with('/') {
        return format!("{origin}{}", without_dot_segments(reference));
    }
    let directory = match path.rfind('/') {
        Some(i) => &path[..=i],
        None if origin.contains("//") => "/",
        None => "",
    };
    format!(
        "{origin}{}",
        without_dot_segments(&format!("{directory}{reference}"))
    )
}

/// `uri` with its path's `.` and `..` segments taken out.
fn without_dot_segments(uri: &str) -> String {
    if !uri.contains("./") && !uri.ends_with("/.") && !uri.ends_with("/..") {
        return uri.to_string();
    }
    let (head, path) = uri.split_at(origin_len(uri));
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." | ".." => {
                // `..` takes off the segment before it, never the root.
                if *segment == ".." && out.last().is_some_and(|s| !s.is_empty()) {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("{head}{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_as_rfc_3986_says() {
        let base = "http://a/b/c/d;p";
        for (reference, want) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../g", "http://a/g"),
            ("", "http://a/b/c/d;p"),
            ("urn:x:y", "urn:x:y"),
        ] {
            assert_eq!(join(base, reference), want, "{reference}");
        }
        assert_eq!(join("", "nested.json"), "nested.json");
        assert_eq!(join("http://h", "x.json"), "http://h/x.json");
        assert_eq!(join("dir/a.json", "b.json"), "dir/b.json");
        assert_eq!(join("", "dir/../b.json"), "b.json");
    }
}
