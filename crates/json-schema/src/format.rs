//! String `format`s with a regular definition.
//!
//! Each regex is a *subset* of what the format's RFC allows (and of what
//! common validators accept), so enforcing it is sound whether a validator
//! treats `format` as an assertion or as an annotation. All use only
//! characters that need no JSON escape.

/// The regex for a known format's string content (between the quotes) with
/// its length range in characters, or `None` for a format we do not know
/// (formats are annotations by default in JSON Schema 2020-12; an unknown
/// one constrains nothing). Every format that common validators check
/// (Python `jsonschema`'s `FormatChecker`, ajv-formats) is known here.
pub(crate) fn format_regex(name: &str) -> Option<(String, u64, Option<u64>)> {
    let date = date();
    let time = time();
    let unreserved = r"A-Za-z0-9\-._~";
    let sub_delims = r"!$&'()*+,;=";
    let pct = "%[0-9A-Fa-f]{2}";
    let pchar = format!("(?:[{unreserved}{sub_delims}:@]|{pct})");
    // A path segment without ':' (the first segment of a relative reference).
    let pchar_nc = format!("(?:[{unreserved}{sub_delims}@]|{pct})");
    let segment = format!("{pchar}*");
    let query = format!(r"(?:{pchar}|[/?])*");
    let tail = format!(r"(?:\?{query})?(?:#{query})?");
    // RFC 3986 `scheme ":" hier-part`, with an authority (`//host[:port]`)
    // or a rootless path.
    let host = format!("(?:[{unreserved}{sub_delims}]|{pct})*");
    let uri = format!(
        r"[A-Za-z][A-Za-z0-9+.\-]*:(?://{host}(?::[0-9]*)?(?:/{segment})*|{pchar}+(?:/{segment})*){tail}"
    );
    // A relative reference: an absolute path or a path whose first segment
    // has no ':' (so it is not read as a scheme), possibly empty.
    let relative = format!(r"(?:(?:/{segment})+|{pchar_nc}+(?:/{segment})*)?{tail}");
    // Host names: labels of letters and digits with single inner hyphens
    // (so IDNA accepts them too), at most 62 characters, at most 4 labels.
    let label = "[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,2}";
    let hostname = format!(r"{label}(?:\.{label}){{0,3}}");
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let pointer_token = r#"(?:[^~/"\\\x00-\x1F]|~[01])*"#;
    Some(match name {
        "date" => (date, 10, Some(10)),
        "time" => (time, 10, None),
        "date-time" => (format!("{date}T{time}"), 20, None),
        "uuid" => (
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}".into(),
            36,
            Some(36),
        ),
        "ipv4" | "ip-address" => (format!(r"{octet}(?:\.{octet}){{3}}"), 7, Some(15)),
        // The full eight-group form only.
        "ipv6" => (
            "[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}".into(),
            15,
            Some(39),
        ),
        "email" | "idn-email" => {
            // A dot-atom local part and a host name with a letter TLD.
            let atom = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
            (
                format!(r"{atom}(?:\.{atom})*@(?:{label}\.){{1,3}}[A-Za-z]{{2,20}}"),
                6,
                None,
            )
        }
        "hostname" | "idn-hostname" | "host-name" => (hostname, 1, Some(251)),
        "uri" | "iri" => (uri, 2, None),
        "uri-reference" | "iri-reference" => (format!("(?:{uri}|{relative})"), 0, None),
        "uri-template" => {
            // A template without expressions: URI characters except those
            // RFC 6570 excludes from literals (`'`, `{`, `}`...).
            (
                format!(r"(?:[{unreserved}:/?#\[\]@!$&()*+,;=]|{pct})*"),
                0,
                None,
            )
        }
        "json-pointer" => (format!("(?:/{pointer_token})*"), 0, None),
        "relative-json-pointer" => (
            format!("(?:0|[1-9][0-9]*)(?:#|(?:/{pointer_token})*)"),
            1,
            None,
        ),
        // RFC 3339 appendix A durations.
        "duration" => {
            let time = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
            let date = "(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)";
            (format!("P(?:[0-9]+W|{date}(?:{time})?|{time})"), 3, None)
        }
        // Text with no regex metacharacter compiles in every engine.
        "regex" => ("[A-Za-z0-9 _-]*".into(), 0, None),
        _ => return None,
    })
}

/// RFC 3339 `full-date`, with the real number of days in each month
/// (29 February only in leap years).
fn date() -> String {
    let year = "[0-9]{4}";
    let leap_year = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    format!(
        "(?:{year}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|{leap_year}-02-29)"
    )
}

/// RFC 3339 `full-time` (leap seconds left out), upper-case `Z`.
fn time() -> String {
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    fn r(name: &str) -> Regex {
        let (text, _, _) = format_regex(name).unwrap();
        Regex::new(&format!("^(?:{text})$")).unwrap()
    }

    #[test]
    fn dates_and_times() {
        let d = r("date");
        assert!(d.is_match("2024-02-29"));
        assert!(d.is_match("2000-02-29"));
        assert!(!d.is_match("1900-02-29"));
        assert!(!d.is_match("2023-02-29"));
        assert!(!d.is_match("2023-04-31"));
        assert!(!d.is_match("2023-13-01"));
        let dt = r("date-time");
        assert!(dt.is_match("2023-01-31T23:59:59.123+01:00"));
        assert!(dt.is_match("2023-01-31T00:00:00Z"));
        assert!(!dt.is_match("2023-01-31T24:00:00Z"));
        assert!(!dt.is_match("2023-01-31 00:00:00Z"));
        assert!(!dt.is_match("2023-01-31T00:00:00"));
    }

    #[test]
    fn other_formats() {
        assert!(r("uuid").is_match("123e4567-e89b-12d3-a456-426614174000"));
        assert!(!r("uuid").is_match("123e4567e89b12d3a456426614174000"));
        assert!(r("ipv4").is_match("192.168.0.255"));
        assert!(!r("ipv4").is_match("192.168.0.256"));
        assert!(!r("ipv4").is_match("01.1.1.1"));
        assert!(r("email").is_match("john.doe+x@example.co.uk"));
        assert!(!r("email").is_match("john@localhost"));
        assert!(r("uri-reference").is_match("../a/b?x#y"));
        assert!(r("uri-reference").is_match("/a/b"));
        assert!(r("uri-reference").is_match("https://x.org/a"));
        assert!(!r("uri-reference").is_match("://"));
        assert!(!r("uri-template").is_match("http://example.com/{"));
        assert!(r("duration").is_match("P1Y2M3DT4H5M6S"));
        assert!(r("duration").is_match("PT5M"));
        assert!(!r("duration").is_match("P"));
        assert!(!r("duration").is_match("PT"));
        assert!(r("hostname").is_match("my-host.example.com"));
        assert!(!r("hostname").is_match("-bad.com"));
        assert!(r("json-pointer").is_match("/a~1b/0"));
        assert!(!r("json-pointer").is_match("a"));
        assert!(!r("email").is_match(".john@example.com"));
        assert!(r("uri").is_match("https://example.com:8080/a/b?x=1&y=2#frag"));
        assert!(r("uri").is_match("urn:isbn:0451450523"));
        assert!(!r("uri").is_match("/relative/path"));
        assert!(!r("uri").is_match("http://exa mple.com"));
        assert!(format_regex("no-such-format").is_none());
    }
}
