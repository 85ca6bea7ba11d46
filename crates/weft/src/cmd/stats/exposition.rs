//! A small, bounded parser of the Prometheus text exposition format (0.0.4),
//! as a Weft node's `/metrics` endpoint serves it.
//!
//! It reads sample lines `name{label="value",...} value [timestamp]`, skips
//! `#` lines (HELP, TYPE, comments, OpenMetrics' `# EOF`) and blank lines, and
//! decodes the label escapes `\\`, `\"` and `\n`. A value keeps its text's
//! integer-ness: `17` and `1.7e1` are [`Num::Int`], `0.25` is [`Num::Float`],
//! so a report can print the scraped figure unchanged. It never panics on
//! garbage: a malformed line is a [`ParseError`] naming the line and what was
//! wrong, and the input size is bounded by [`MAX_BYTES`].

use std::collections::BTreeMap;
use std::fmt;

/// Largest exposition accepted (the HTTP fetch reads no more than this).
pub const MAX_BYTES: usize = 32 << 20;
/// Most labels one sample may carry.
const MAX_LABELS: usize = 64;

/// A scraped number: integral values stay integers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Default for Num {
    fn default() -> Self {
        Num::Int(0)
    }
}

/// Integral floats up to 2^53 are exact; beyond that a float stays a float.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl Num {
    /// Parses a sample value as Prometheus writes it (`NaN`, `+Inf`, `-Inf` too).
    pub fn parse(text: &str) -> Option<Num> {
        if let Ok(i) = text.parse::<i64>() {
            return Some(Num::Int(i));
        }
        let f = match text {
            "NaN" | "nan" => f64::NAN,
            "+Inf" | "Inf" | "+inf" | "inf" => f64::INFINITY,
            "-Inf" | "-inf" => f64::NEG_INFINITY,
            _ => text.parse::<f64>().ok()?,
        };
        Some(Num::from_f64(f))
    }

    /// An integral, exactly representable float becomes an integer.
    pub fn from_f64(f: f64) -> Num {
        if f.is_finite() && f.fract() == 0.0 && f.abs() <= EXACT_INT {
            // In range and integral: the cast is exact.
            Num::Int(f as i64)
        } else {
            Num::Float(f)
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// Adds two values (series of one key that differ only in unknown labels).
    pub fn add(self, other: Num) -> Num {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => match a.checked_add(b) {
                Some(s) => Num::Int(s),
                None => Num::Float(a as f64 + b as f64),
            },
            (a, b) => Num::Float(a.as_f64() + b.as_f64()),
        }
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x}"),
        }
    }
}

impl serde::Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Num::Int(i) => s.serialize_i64(i),
            // serde_json writes NaN and infinities as null.
            Num::Float(f) => s.serialize_f64(f),
        }
    }
}

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: Num,
}

impl Series {
    /// A label's value, "" when absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }
}

/// What was wrong with an exposition.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("exposition is {size} bytes, more than the {max} accepted")]
    TooLarge { size: usize, max: usize },
    #[error("exposition holds no samples")]
    Empty,
    #[error("line {line}: {what}")]
    Line { line: usize, what: LineError },
}

/// What was wrong with one sample line.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq)]
pub enum LineError {
    #[error("metric name expected")]
    Name,
    #[error("label name expected")]
    LabelName,
    #[error("'=' expected after label name")]
    LabelEquals,
    #[error("quoted label value expected")]
    LabelQuote,
    #[error("label value not terminated")]
    LabelUnterminated,
    #[error("unknown escape in label value")]
    LabelEscape,
    #[error("',' or '}}' expected between labels")]
    LabelSeparator,
    #[error("more than {MAX_LABELS} labels")]
    TooManyLabels,
    #[error("sample value missing")]
    ValueMissing,
    #[error("sample value is not a number")]
    Value,
    #[error("timestamp is not an integer")]
    Timestamp,
    #[error("unexpected text after the timestamp")]
    Trailing,
}

/// Parses a whole exposition into its samples, in order.
pub fn parse(text: &str) -> Result<Vec<Series>, ParseError> {
    if text.len() > MAX_BYTES {
        return Err(ParseError::TooLarge {
            size: text.len(),
            max: MAX_BYTES,
        });
    }
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let series = parse_line(line).map_err(|what| ParseError::Line { line: i + 1, what })?;
        out.push(series);
    }
    if out.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(out)
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Splits a leading identifier off `s`: (identifier, rest).
fn take_name(s: &str, colon_ok: bool) -> Option<(&str, &str)> {
    let mut chars = s.char_indices();
    match chars.next() {
        Some((_, c)) if is_name_start(c) && (colon_ok || c != ':') => {}
        _ => return None,
    }
    let end = chars
        .find(|&(_, c)| !(is_name_char(c) && (colon_ok || c != ':')))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    Some((s.get(..end)?, s.get(end..)?))
}

/// Parses one non-comment, non-empty line.
fn parse_line(line: &str) -> Result<Series, LineError> {
    let (name, mut rest) = take_name(line, true).ok_or(LineError::Name)?;
    let mut labels = BTreeMap::new();
    rest = rest.trim_start();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels)?;
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = fields.next().ok_or(LineError::ValueMissing)?;
    let value = Num::parse(value).ok_or(LineError::Value)?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| LineError::Timestamp)?;
    }
    if fields.next().is_some() {
        return Err(LineError::Trailing);
    }
    Ok(Series {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `name="value",...}` (after the `{`); returns the text after `}`.
fn parse_labels<'a>(
    mut s: &'a str,
    labels: &mut BTreeMap<String, String>,
) -> Result<&'a str, LineError> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        if labels.len() >= MAX_LABELS {
            return Err(LineError::TooManyLabels);
        }
        let (name, after) = take_name(s, false).ok_or(LineError::LabelName)?;
        let after = after
            .trim_start()
            .strip_prefix('=')
            .ok_or(LineError::LabelEquals)?;
        let after = after
            .trim_start()
            .strip_prefix('"')
            .ok_or(LineError::LabelQuote)?;
        let (value, after) = take_quoted(after)?;
        labels.insert(name.to_string(), value);
        s = after.trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(LineError::LabelSeparator);
        }
    }
}

/// Reads an escaped label value up to its closing quote: (value, rest after the quote).
fn take_quoted(s: &str) -> Result<(String, &str), LineError> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, s.get(i + 1..).unwrap_or(""))),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                Some(_) => return Err(LineError::LabelEscape),
                None => return Err(LineError::LabelUnterminated),
            },
            c => value.push(c),
        }
    }
    Err(LineError::LabelUnterminated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_escapes_values_and_timestamps() {
        let text = "# HELP x a help\n# TYPE x counter\n\
            x_total{a=\"1\",b=\"q\\\"uo\\\\te\\nnl\",} 17 1700000000000\n\
            y 1.5e3\nz{} 0.25\nn NaN\ni +Inf\n  w { k = \"v\" }  -3\n# EOF\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 6);
        assert_eq!(s[0].name, "x_total");
        assert_eq!(s[0].label("a"), "1");
        assert_eq!(s[0].label("b"), "q\"uo\\te\nnl");
        assert_eq!(s[0].label("absent"), "");
        assert_eq!(s[0].value, Num::Int(17));
        assert_eq!(s[1].value, Num::Int(1500));
        assert_eq!(s[2].value, Num::Float(0.25));
        assert!(matches!(s[3].value, Num::Float(f) if f.is_nan()));
        assert_eq!(s[4].value, Num::Float(f64::INFINITY));
        assert_eq!(s[5].value, Num::Int(-3));
        assert_eq!(s[5].label("k"), "v");
    }

    #[test]
    fn large_integers_and_floats_keep_their_text() {
        assert_eq!(
            Num::parse("18446744073709551615"),
            Some(Num::Float(1.8446744073709552e19))
        );
        assert_eq!(
            Num::parse("9007199254740993"),
            Some(Num::Int(9007199254740993))
        );
        assert_eq!(Num::parse("1e300"), Some(Num::Float(1e300)));
        assert_eq!(
            Num::Int(i64::MAX).add(Num::Int(1)),
            Num::Float(i64::MAX as f64 + 1.0)
        );
        assert_eq!(serde_json::to_string(&Num::Int(42)).unwrap(), "42");
        assert_eq!(serde_json::to_string(&Num::Float(0.5)).unwrap(), "0.5");
        assert_eq!(
            serde_json::to_string(&Num::Float(f64::NAN)).unwrap(),
            "null"
        );
    }

    #[test]
    fn malformed_lines_are_named() {
        let cases: &[(&str, LineError)] = &[
            ("9x 1", LineError::Name),
            ("x{=\"a\"} 1", LineError::LabelName),
            ("x{a \"b\"} 1", LineError::LabelEquals),
            ("x{a=b} 1", LineError::LabelQuote),
            ("x{a=\"b} 1", LineError::LabelUnterminated),
            ("x{a=\"b\\", LineError::LabelUnterminated),
            ("x{a=\"\\t\"} 1", LineError::LabelEscape),
            ("x{a=\"b\" c=\"d\"} 1", LineError::LabelSeparator),
            ("x{a=\"b\"}", LineError::ValueMissing),
            ("x", LineError::ValueMissing),
            ("x one", LineError::Value),
            ("x 1 soon", LineError::Timestamp),
            ("x 1 2 3", LineError::Trailing),
            ("x{a:b=\"c\"} 1", LineError::LabelEquals),
        ];
        for (line, want) in cases {
            let text = format!("ok 1\n{line}\n");
            assert_eq!(
                parse(&text),
                Err(ParseError::Line {
                    line: 2,
                    what: *want
                }),
                "{line:?}"
            );
        }
        let many: String = (0..=MAX_LABELS).map(|i| format!("l{i}=\"v\",")).collect();
        assert_eq!(
            parse(&format!("x{{{many}}} 1")),
            Err(ParseError::Line {
                line: 1,
                what: LineError::TooManyLabels
            })
        );
        assert_eq!(parse("# only comments\n\n"), Err(ParseError::Empty));
        assert_eq!(parse(""), Err(ParseError::Empty));
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let alphabet: Vec<char> = "ab_:{}=\",\\ \n#.0123456789eE+-InfNa\té€\u{0}"
            .chars()
            .collect();
        for _ in 0..2000 {
            let len = (seed % 80) as usize;
            let mut s = String::new();
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let _ = parse(&s);
        }
        let _ = parse("<html><body>Not Found</body></html>");
        let _ = parse("\u{feff}x 1");
        let _ = parse("x{a=\"é\\");
    }
}
