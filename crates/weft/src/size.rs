//! Sizes as users write them: `4M`, `64K`, `1G`, `4MiB`, `65536`.

/// Parses a byte count with an optional binary suffix (K, M, G, T; `iB`/`B` allowed).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "{text:?} is not a size (examples: 4M, 64K, 1G, 65536)"
        ));
    }
    let n: u64 = num.parse().map_err(|_| format!("{text:?} is too large"))?;
    let shift = match suffix
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{text:?} has an unknown unit (use K, M, G or T)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

pub use weft_bench::report::human as show_size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(show_size(4 << 20), "4M");
        assert_eq!(show_size(1000), "1000");
    }
}
