//! Checks and parsers of stanza values: names, devices, server lists,
//! usage, failure groups, sizes.

use super::{StanzaUsage, MAX_FAILURE_GROUP, MAX_NAME_LEN};

/// At most 60 characters of user text, for messages.
pub(super) fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if s.chars().nth(60).is_some() {
        out.push_str("...");
    }
    out
}

/// The first character of `s` that is neither ASCII alphanumeric nor in `extra`.
pub(super) fn bad_char(s: &str, extra: &str) -> Option<char> {
    s.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || extra.contains(*c)))
}

pub(super) fn check_name(v: &str) -> Result<(), String> {
    let bad = bad_char(v, "_-.");
    if v.len() > MAX_NAME_LEN {
        Err(format!("is longer than {MAX_NAME_LEN} characters"))
    } else if !v.starts_with(|c: char| c.is_ascii_alphabetic()) {
        Err("does not start with a letter".into())
    } else if let Some(c) = bad {
        Err(format!("contains the character {c:?}"))
    } else {
        Ok(())
    }
}

pub(super) fn check_device(v: &str) -> Result<(), String> {
    if !v.starts_with('/') {
        Err("is not an absolute path".into())
    } else if v.contains('\0') {
        Err("contains a NUL character".into())
    } else {
        Ok(())
    }
}

pub(super) fn parse_servers(v: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for s in v.split(',') {
        let bad = bad_char(s, "._-:[]");
        if s.is_empty() {
            return Err("has an empty server name".into());
        } else if let Some(c) = bad {
            return Err(format!("has server {:?} with the character {c:?}", clip(s)));
        } else if out.iter().any(|o| o.eq_ignore_ascii_case(s)) {
            return Err(format!("names server {s} twice"));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

pub(super) fn parse_usage(v: &str) -> Result<StanzaUsage, String> {
    match v.to_ascii_lowercase().as_str() {
        "dataandmetadata" => Ok(StanzaUsage::DataAndMetadata),
        "dataonly" => Ok(StanzaUsage::DataOnly),
        "metadataonly" => Ok(StanzaUsage::MetadataOnly),
        "desconly" => Err("is not supported: Weft keeps no file system descriptor \
                           copies on separate disks"
            .into()),
        _ => Err("is not a disk usage".into()),
    }
}

pub(super) fn parse_failure_group(v: &str) -> Result<u32, String> {
    let digits = v.strip_prefix(|c| c == '-' || c == '+').unwrap_or(v);
    if v.contains(',') {
        Err("is a topology vector, which Weft does not support".into())
    } else if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        Err("is not a number".into())
    } else if v.starts_with('-') && digits.bytes().any(|b| b != b'0') {
        Err(
            "is negative: Weft failure groups start at 0 (leave failureGroup out \
             to use the server's node number)"
                .into(),
        )
    } else {
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_FAILURE_GROUP => Ok(n),
            _ => Err("is out of range".into()),
        }
    }
}

/// Unit letters and their binary shifts, largest first.
pub(super) const UNITS: [(char, u32); 5] = [('P', 50), ('T', 40), ('G', 30), ('M', 20), ('K', 10)];

/// `N`, `NB`, `NK`, `NKB`, `NKiB` ... up to `P`: binary units, case-insensitive.
pub(super) fn parse_size(v: &str) -> Result<u64, String> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at_checked(split).unwrap_or((v, ""));
    let suffix = suffix.to_ascii_lowercase();
    let mut chars = suffix.chars();
    let letter = chars.next().unwrap_or('b');
    let unit = match UNITS.iter().find(|(u, _)| u.to_ascii_lowercase() == letter) {
        _ if suffix.is_empty() || suffix == "b" => 1,
        Some((_, shift)) if matches!(chars.as_str(), "" | "b" | "ib") => 1u64 << shift,
        _ => return Err(format!("has the unknown unit {:?}", clip(&suffix))),
    };
    if digits.is_empty() {
        return Err("is not a size".into());
    }
    let n: u64 = digits.parse().map_err(|_| "is too large".to_string())?;
    match n.checked_mul(unit) {
        Some(0) => Err("is zero".into()),
        Some(bytes) => Ok(bytes),
        None => Err("is too large".into()),
    }
}

/// A size the way [`parse_size`] reads it back: in the largest exact unit.
pub(super) fn format_size(n: u64) -> String {
    let exact = |shift: u32| n >= 1 << shift && n.trailing_zeros() >= shift;
    match UNITS.iter().find(|(_, shift)| exact(*shift)) {
        Some((u, shift)) => format!("{}{u}", n >> shift),
        None => n.to_string(),
    }
}

pub(super) const BAD_BLOCK: &str = "is not a power of two from 64K to 16M";
