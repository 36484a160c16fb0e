//! MaskBench files (a JSON Schema plus valid and invalid instances), and the
//! exact instance text MaskBench tokenizes: Python's
//! `json.dumps(data, ensure_ascii=False)` (`", "` and `": "` separators, keys
//! in document order, non-ASCII as UTF-8, floats as Python's `repr`).
//! Shared by the CLI's benchmark runner and the backends' conformance tests.

use serde_json::Value;
use std::path::Path;

/// One MaskBench file.
#[derive(Debug, Clone)]
pub struct MaskBenchFile {
    /// The file name, e.g. `Github_easy---o6202.json`.
    pub id: String,
    pub schema: Value,
    pub tests: Vec<MaskBenchTest>,
}

#[derive(Debug, Clone)]
pub struct MaskBenchTest {
    pub valid: bool,
    pub data: Value,
}

impl MaskBenchTest {
    /// The text MaskBench tokenizes for this instance.
    pub fn text(&self) -> String {
        dumps_python(&self.data)
    }
}

impl MaskBenchFile {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let id = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::parse(&id, &text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(id: &str, text: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let schema = v.get("schema").cloned().ok_or("no \"schema\" field")?;
        let tests = v
            .get("tests")
            .and_then(|t| t.as_array())
            .ok_or("no \"tests\" array")?
            .iter()
            .map(|t| {
                Ok(MaskBenchTest {
                    valid: t
                        .get("valid")
                        .and_then(|v| v.as_bool())
                        .ok_or("test without \"valid\"")?,
                    data: t.get("data").cloned().ok_or("test without \"data\"")?,
                })
            })
            .collect::<Result<Vec<_>, &str>>()?;
        Ok(MaskBenchFile {
            id: id.to_string(),
            schema,
            tests,
        })
    }

    /// The split: the file-name prefix before `---`; for names without it
    /// (`BFCL_simple_12.json`) the name without `.json` and a trailing `_<n>`.
    pub fn split(&self) -> String {
        split_of(&self.id)
    }
}

/// See [`MaskBenchFile::split`].
pub fn split_of(id: &str) -> String {
    if let Some((split, _)) = id.split_once("---") {
        return split.to_string();
    }
    let base = id.strip_suffix(".json").unwrap_or(id);
    match base.rsplit_once('_') {
        Some((head, tail)) if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) => {
            head.to_string()
        }
        _ => base.to_string(),
    }
}

/// Python's `json.dumps(v, ensure_ascii=False)`.
pub fn dumps_python(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, k);
                out.push_str(": ");
                write_value(out, x);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Integers print as integers; floats as Python's `repr`: shortest digits,
/// exponent form (`1e-05`, `1e+16`) when the exponent is < -4 or >= 16,
/// otherwise fixed with at least one decimal (`1.0`, `0.001`).
fn write_number(out: &mut String, n: &serde_json::Number) {
    if n.is_i64() || n.is_u64() {
        out.push_str(&n.to_string());
        return;
    }
    let Some(f) = n.as_f64() else {
        out.push_str(&n.to_string());
        return;
    };
    if !f.is_finite() {
        out.push_str(if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        });
        return;
    }
    // `{:e}` gives the shortest round-trip digits: "d.ddde±x".
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if neg {
        out.push('-');
    }
    if !(-4..16).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    } else if exp < 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-exp - 1) as usize));
        out.push_str(&digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            out.push_str(&"0".repeat(point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_json_dumps() {
        let v: Value = serde_json::from_str(
            r#"{"b": [1, 2.5, 1e-5, 1e16, 123456789.0, 0.0001, -0.5, 1e300], "a": "é\"\n\u0001", "c": {}}"#,
        )
        .unwrap();
        assert_eq!(
            dumps_python(&v),
            r#"{"b": [1, 2.5, 1e-05, 1e+16, 123456789.0, 0.0001, -0.5, 1e+300], "a": "é\"\n\u0001", "c": {}}"#
        );
    }

    #[test]
    fn splits() {
        assert_eq!(split_of("Github_easy---o6202.json"), "Github_easy");
        assert_eq!(split_of("BFCL_simple_12.json"), "BFCL_simple");
        assert_eq!(split_of("JME_0.json"), "JME");
    }
}
