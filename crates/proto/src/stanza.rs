//! Parser for NSD stanza files: the `-F FILE` of `weft nsd create` and
//! `weft fs create NAME`, written as for GPFS `mmcrnsd -F` / `mmcrfs -F`.
//!
//! The grammar is the GPFS one (Administration Guide, "Stanza files"): a
//! stanza starts with a line whose first token is `%nsd:` or `%pool:`; its
//! `key=value` pairs follow on that line and on the following lines up to the
//! next `%...:` line or the end of the file. A trailing `\` also continues a
//! line. Lines starting with `#` are comments, and so is the rest of a line
//! from a token starting with `#`. Keys match case-insensitively; a value has
//! no spaces and may be wrapped in double quotes. `%nsd:` knows `nsd`,
//! `device`, `servers`, `usage`, `failureGroup`, `pool`, `thinDiskType` and
//! (a Weft addition) `size`; `%pool:` knows `pool` and `blockSize`, and
//! accepts GPFS's layout keys with a [`Note`] that they are ignored.
//!
//! [`parse`] collects every bad line as a [`StanzaError`] so the user can fix
//! them all at once; [`render_errors`] makes one message of them. Pure: no I/O.

use std::collections::HashMap;
use std::fmt;

use crate::config::Usage;
use crate::layout::valid_block_size;

/// Longest NSD or pool name.
pub const MAX_NAME_LEN: usize = 64;
/// Largest failure group (GPFS's limit).
pub const MAX_FAILURE_GROUP: u32 = 2_147_483_647;

/// The `usage=` of an `%nsd:` stanza. GPFS's `descOnly` is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StanzaUsage {
    #[default]
    DataAndMetadata,
    DataOnly,
    MetadataOnly,
}

impl StanzaUsage {
    pub fn to_config(self) -> Usage {
        match self {
            StanzaUsage::DataAndMetadata => Usage::DataAndMetadata,
            StanzaUsage::DataOnly => Usage::DataOnly,
            StanzaUsage::MetadataOnly => Usage::MetadataOnly,
        }
    }
    pub fn as_gpfs(self) -> &'static str {
        self.to_config().as_gpfs()
    }
}

/// One `%nsd:` stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsdStanza {
    /// As written, or `nsd<N>` generated as GPFS does.
    pub name: String,
    pub device: String,
    /// Primary server first, then backups. Empty when `servers=` is absent.
    pub servers: Vec<String>,
    pub usage: StanzaUsage,
    /// `None` when absent: the caller uses the server's node id, as GPFS does.
    pub failure_group: Option<u32>,
    pub pool: String,
    pub size: Option<u64>,
    /// Line of the `%nsd:` header, 1-based.
    pub line: usize,
}

/// One `%pool:` stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStanza {
    pub pool: String,
    pub block_size: Option<u64>,
    /// Line of the `%pool:` header, 1-based.
    pub line: usize,
}

/// A key that was accepted but has no effect in Weft; worth telling the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub line: usize,
    pub key: String,
    pub value: String,
    pub why: &'static str,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (line, key, value, why) = (self.line, &self.key, &self.value, self.why);
        write!(f, "line {line}: {key}={value} is ignored: {why}")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stanzas {
    pub nsds: Vec<NsdStanza>,
    pub pools: Vec<PoolStanza>,
    pub notes: Vec<Note>,
}

/// The two stanza types Weft reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StanzaType {
    Nsd,
    Pool,
}

const NSD_KEYS: &str = "nsd device servers usage failureGroup pool thinDiskType size";
const POOL_KEYS: &str =
    "pool blockSize usage layoutMap writeAffinityDepth blockGroupFactor allowWriteAffinity";

impl StanzaType {
    pub fn as_str(self) -> &'static str {
        match self {
            StanzaType::Nsd => "nsd",
            StanzaType::Pool => "pool",
        }
    }
    fn keys(self) -> &'static str {
        match self {
            StanzaType::Nsd => NSD_KEYS,
            StanzaType::Pool => POOL_KEYS,
        }
    }
    /// The canonical spelling of a key this stanza type knows.
    fn key(self, written: &str) -> Option<&'static str> {
        self.keys()
            .split(' ')
            .find(|k| k.eq_ignore_ascii_case(written))
    }
}

/// One problem in a stanza file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StanzaError {
    /// 1-based line of the offending key or stanza header; 0 for [`StanzaErrorKind::Empty`].
    pub line: usize,
    /// The key as the user wrote it, when the problem is about one key.
    pub key: Option<String>,
    pub kind: StanzaErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StanzaErrorKind {
    UnknownKey {
        stanza: StanzaType,
    },
    MissingValue,
    /// `why` reads after `key=value`, e.g. "is not a number".
    BadValue {
        value: String,
        why: String,
    },
    MissingDevice,
    MissingPoolName,
    DuplicateKey {
        first_line: usize,
    },
    DuplicateName {
        name: String,
        first_line: usize,
    },
    DuplicateDevice {
        device: String,
        first_line: usize,
    },
    DuplicatePool {
        pool: String,
        first_line: usize,
    },
    /// Text before the first stanza header.
    NotAStanza {
        text: String,
    },
    UnknownStanzaType {
        ty: String,
    },
    /// A `%` line that is not `%nsd:` or `%pool:` with its colon.
    BadHeader {
        text: String,
    },
    /// A token without `=` or with nothing before it.
    NotKeyValue {
        token: String,
    },
    /// The file has no `%nsd:` stanza.
    Empty,
}

use StanzaErrorKind as K;

impl std::error::Error for StanzaError {}

impl fmt::Display for StanzaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key.as_deref().unwrap_or("");
        if self.kind != K::Empty {
            write!(f, "line {}: ", self.line)?;
        }
        let hint = hint(key);
        let d = "is already used by the stanza on line";
        match &self.kind {
            K::UnknownKey { stanza } => {
                let (ty, known) = (stanza.as_str(), stanza.keys().replace(' ', "=, "));
                write!(
                    f,
                    "unknown key {key:?} in a %{ty}: stanza: write one of {known}="
                )
            }
            K::MissingValue => write!(f, "{key} has no value: write {hint}"),
            K::BadValue { value, why } => write!(f, "{key}={value} {why}: write {hint}"),
            K::MissingDevice => write!(
                f,
                "this %nsd: stanza has no device: write device=/absolute/path"
            ),
            K::MissingPoolName => write!(f, "this %pool: stanza has no pool name: write pool=NAME"),
            K::DuplicateKey { first_line: l } => {
                write!(
                    f,
                    "{key} is given twice in one stanza (first on line {l}): keep only one"
                )
            }
            K::DuplicateName {
                name,
                first_line: l,
            } => {
                write!(
                    f,
                    "NSD name {name} {d} {l}: give every %nsd: stanza its own nsd=NAME"
                )
            }
            K::DuplicateDevice {
                device,
                first_line: l,
            } => {
                write!(
                    f,
                    "device {device} {d} {l}: give every NSD its own device=PATH"
                )
            }
            K::DuplicatePool {
                pool,
                first_line: l,
            } => {
                write!(f, "pool {pool} {d} {l}: keep one %pool: stanza per pool")
            }
            K::NotAStanza { text } => write!(
                f,
                "{text:?} comes before any stanza: start a stanza with %nsd: \
                 or make the line a comment with #"
            ),
            K::UnknownStanzaType { ty } => write!(
                f,
                "%{ty}: stanzas are not supported: Weft reads only %nsd: and %pool: stanzas; \
                 remove this stanza or comment it out with #"
            ),
            K::BadHeader { text } => write!(
                f,
                "{text:?} is not a stanza header: write %nsd: or %pool: (with the colon) \
                 followed by key=value pairs"
            ),
            K::NotKeyValue { token } => write!(
                f,
                "{token:?} is not a key=value pair: write key=value with no spaces around \"=\""
            ),
            K::Empty => write!(
                f,
                "the stanza file has no %nsd: stanza: describe each disk with a line such as \
                 %nsd: nsd=nsd1 device=/path servers=NODE"
            ),
        }
    }
}

/// All errors as one message, one line each, for the CLI to print.
pub fn render_errors(errors: &[StanzaError]) -> String {
    let n = errors.len();
    let s = if n == 1 { "" } else { "s" };
    let mut out = format!("{n} problem{s} in the stanza file:");
    for e in errors {
        out.push_str(&format!("\n  {e}"));
    }
    out
}

/// What to write instead, for the key as the user wrote it.
fn hint(written: &str) -> String {
    let name_rule = "with 1 to 64 letters, digits, '_', '-' or '.', starting with a letter";
    let key = StanzaType::Nsd
        .key(written)
        .or_else(|| StanzaType::Pool.key(written));
    match key {
        Some("nsd") => format!("nsd=NAME {name_rule}"),
        Some("device") => "device=/absolute/path".into(),
        Some("servers") => "servers=NODE[,NODE...], the primary server first, none twice".into(),
        Some("usage") => "usage=dataAndMetadata, usage=dataOnly or usage=metadataOnly".into(),
        Some("failureGroup") => "failureGroup=N with N from 0 to 2147483647".into(),
        Some("pool") => format!("pool=NAME {name_rule}"),
        Some("thinDiskType") => "thinDiskType=no, nvme, scsi or auto".into(),
        Some("size") => "size=N in bytes or with a K, M, G, T or P suffix, e.g. size=200G".into(),
        Some("blockSize") => "blockSize=N, a power of two from 64K to 16M, e.g. 4M".into(),
        Some(k) => format!("{k}=VALUE"),
        None => "key=value".into(),
    }
}

/// At most 60 characters of user text, for messages.
fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if s.chars().nth(60).is_some() {
        out.push_str("...");
    }
    out
}

/// The first character of `s` that is neither ASCII alphanumeric nor in `extra`.
fn bad_char(s: &str, extra: &str) -> Option<char> {
    s.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || extra.contains(*c)))
}

fn check_name(v: &str) -> Result<(), String> {
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

fn check_device(v: &str) -> Result<(), String> {
    if !v.starts_with('/') {
        Err("is not an absolute path".into())
    } else if v.contains('\0') {
        Err("contains a NUL character".into())
    } else {
        Ok(())
    }
}

fn parse_servers(v: &str) -> Result<Vec<String>, String> {
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

fn parse_usage(v: &str) -> Result<StanzaUsage, String> {
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

fn parse_failure_group(v: &str) -> Result<u32, String> {
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
const UNITS: [(char, u32); 5] = [('P', 50), ('T', 40), ('G', 30), ('M', 20), ('K', 10)];

/// `N`, `NB`, `NK`, `NKB`, `NKiB` ... up to `P`: binary units, case-insensitive.
fn parse_size(v: &str) -> Result<u64, String> {
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
fn format_size(n: u64) -> String {
    let exact = |shift: u32| n >= 1 << shift && n.trailing_zeros() >= shift;
    match UNITS.iter().find(|(_, shift)| exact(*shift)) {
        Some((u, shift)) => format!("{}{u}", n >> shift),
        None => n.to_string(),
    }
}

const BAD_BLOCK: &str = "is not a power of two from 64K to 16M";

/// A value with the line and the key spelling where it was written.
#[derive(Debug)]
struct At {
    value: String,
    line: usize,
    key: String,
}

#[derive(Debug, Default)]
struct Draft {
    line: usize,
    seen: Vec<(&'static str, usize)>,
    name: Option<At>,
    device: Option<At>,
    servers: Vec<String>,
    usage: StanzaUsage,
    failure_group: Option<u32>,
    pool: Option<At>,
    size: Option<u64>,
    block_size: Option<u64>,
}

impl Draft {
    fn has(&self, key: &str) -> bool {
        self.seen.iter().any(|(k, _)| *k == key)
    }
}

#[derive(Debug, Default)]
enum Current {
    /// Before the first stanza header.
    #[default]
    Outside,
    /// In a stanza whose header was refused.
    Skip,
    In(StanzaType, Box<Draft>),
}

#[derive(Default)]
struct Parser {
    errors: Vec<StanzaError>,
    notes: Vec<Note>,
    nsds: Vec<Draft>,
    pools: Vec<Draft>,
    current: Current,
}

impl Parser {
    fn err(&mut self, line: usize, key: Option<&str>, kind: StanzaErrorKind) {
        let key = key.map(str::to_string);
        self.errors.push(StanzaError { line, key, kind });
    }

    fn close(&mut self) {
        match std::mem::replace(&mut self.current, Current::Skip) {
            Current::In(StanzaType::Nsd, d) => {
                if !d.has("device") {
                    self.err(d.line, None, K::MissingDevice);
                }
                self.nsds.push(*d);
            }
            Current::In(StanzaType::Pool, d) => {
                if !d.has("pool") {
                    self.err(d.line, None, K::MissingPoolName);
                }
                self.pools.push(*d);
            }
            Current::Outside | Current::Skip => {}
        }
    }

    fn header(&mut self, line: usize, body: &str) {
        self.close();
        let (first, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        let word = first.strip_prefix('%').unwrap_or(first);
        let (ty, tail, colon) = match word.split_once(':') {
            Some((ty, tail)) => (ty, tail, true),
            None => (word, "", false),
        };
        let bad_header = K::BadHeader { text: clip(first) };
        let stanza = if ty.eq_ignore_ascii_case("nsd") {
            StanzaType::Nsd
        } else if ty.eq_ignore_ascii_case("pool") {
            StanzaType::Pool
        } else if colon && !ty.is_empty() && ty.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return self.err(line, None, K::UnknownStanzaType { ty: clip(ty) });
        } else {
            return self.err(line, None, bad_header);
        };
        if !colon {
            // `%nsd` without its colon: say so, but read the stanza anyway.
            self.err(line, None, bad_header);
        }
        let draft = Draft {
            line,
            ..Draft::default()
        };
        self.current = Current::In(stanza, Box::new(draft));
        self.pairs(line, tail);
        self.pairs(line, rest);
    }

    fn pairs(&mut self, line: usize, text: &str) {
        match self.current {
            Current::In(..) => {}
            Current::Skip => return,
            Current::Outside => {
                let text = clip(text.trim());
                if !text.is_empty() {
                    self.err(line, None, K::NotAStanza { text });
                }
                return;
            }
        }
        for tok in text.split_whitespace().take_while(|t| !t.starts_with('#')) {
            self.pair(line, tok);
        }
    }

    fn pair(&mut self, line: usize, tok: &str) {
        let Current::In(stanza, draft) = &mut self.current else {
            return;
        };
        let stanza = *stanza;
        let Some((written, raw)) = tok.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return match stanza.key(tok) {
                Some(_) => self.err(line, Some(tok), K::MissingValue),
                None => self.err(line, None, K::NotKeyValue { token: clip(tok) }),
            };
        };
        let Some(key) = stanza.key(written) else {
            return self.err(line, Some(written), K::UnknownKey { stanza });
        };
        if let Some(&(_, first_line)) = draft.seen.iter().find(|(k, _)| *k == key) {
            return self.err(line, Some(written), K::DuplicateKey { first_line });
        }
        draft.seen.push((key, line));
        let value = match raw.strip_prefix('"') {
            Some(r) => r.strip_suffix('"').ok_or("has an unbalanced double quote"),
            None => Ok(raw),
        };
        let at = |value: &str| {
            let (value, key) = (value.to_string(), written.to_string());
            Some(At { value, line, key })
        };
        let mut note = |why: &'static str| {
            let (key, value) = (written.into(), clip(raw));
            self.notes.push(Note {
                line,
                key,
                value,
                why,
            });
            Ok(())
        };
        let d = draft;
        let result = match (stanza, key, value) {
            (_, _, Err(why)) => Err(why.to_string()),
            (_, _, Ok("")) => return self.err(line, Some(written), K::MissingValue),
            (_, "nsd", Ok(v)) => check_name(v).map(|()| d.name = at(v)),
            (_, "device", Ok(v)) => check_device(v).map(|()| d.device = at(v)),
            (_, "servers", Ok(v)) => parse_servers(v).map(|s| d.servers = s),
            (StanzaType::Nsd, "usage", Ok(v)) => parse_usage(v).map(|u| d.usage = u),
            (_, "failureGroup", Ok(v)) => parse_failure_group(v).map(|n| d.failure_group = Some(n)),
            (_, "pool", Ok(v)) => check_name(v).map(|()| d.pool = at(v)),
            (_, "size", Ok(v)) => parse_size(v).map(|n| d.size = Some(n)),
            (_, "blockSize", Ok(v)) => parse_size(v)
                .and_then(|n| {
                    valid_block_size(n)
                        .then_some(n)
                        .ok_or_else(|| BAD_BLOCK.into())
                })
                .map(|n| d.block_size = Some(n)),
            (_, "thinDiskType", Ok(v)) => match v.to_ascii_lowercase().as_str() {
                "no" => Ok(()),
                "nvme" | "scsi" | "auto" => note("Weft sends no space reclaim commands to devices"),
                _ => Err("is not a thin disk type".into()),
            },
            (StanzaType::Pool, "usage", _) => note("each NSD's usage= decides what it holds"),
            // layoutMap, writeAffinityDepth, blockGroupFactor, allowWriteAffinity
            _ => note("Weft places blocks by its own chain tables, not by GPFS write affinity"),
        };
        if let Err(why) = result {
            let value = clip(raw);
            self.err(line, Some(written), K::BadValue { value, why });
        }
    }

    fn finish(mut self) -> Result<Stanzas, Vec<StanzaError>> {
        self.close();
        if self.nsds.is_empty() {
            self.err(0, None, K::Empty);
        }
        let (nsds, pools) = (&self.nsds, &self.pools);
        let mut errs = Vec::new();
        let names = nsds.iter().filter_map(|d| Some((d.name.as_ref()?, d.line)));
        dups(
            names,
            |name, first_line| K::DuplicateName { name, first_line },
            &mut errs,
        );
        let devices = nsds
            .iter()
            .filter_map(|d| Some((d.device.as_ref()?, d.line)));
        dups(
            devices,
            |device, first_line| K::DuplicateDevice { device, first_line },
            &mut errs,
        );
        let pool_names = pools
            .iter()
            .filter_map(|d| Some((d.pool.as_ref()?, d.line)));
        dups(
            pool_names,
            |pool, first_line| K::DuplicatePool { pool, first_line },
            &mut errs,
        );
        self.errors.extend(errs);
        if !self.errors.is_empty() {
            self.errors.sort_by_key(|e| e.line);
            return Err(self.errors);
        }
        let mut used: Vec<String> = nsds
            .iter()
            .filter_map(|d| Some(d.name.as_ref()?.value.clone()))
            .collect();
        let mut out = Vec::with_capacity(nsds.len());
        for (i, d) in self.nsds.into_iter().enumerate() {
            let name = d.name.map(|n| n.value).unwrap_or_else(|| {
                // GPFS's rule: nsd<index of the stanza>, or the next free number.
                let name = (i + 1..)
                    .map(|n| format!("nsd{n}"))
                    .find(|n| !used.contains(n))
                    .unwrap_or_default();
                used.push(name.clone());
                name
            });
            out.push(NsdStanza {
                name,
                device: d.device.map(|a| a.value).unwrap_or_default(),
                servers: d.servers,
                usage: d.usage,
                failure_group: d.failure_group,
                pool: d.pool.map_or_else(|| "system".into(), |a| a.value),
                size: d.size,
                line: d.line,
            });
        }
        let pools = self.pools.into_iter().map(|d| PoolStanza {
            pool: d.pool.map(|a| a.value).unwrap_or_default(),
            block_size: d.block_size,
            line: d.line,
        });
        let (pools, notes) = (pools.collect(), self.notes);
        Ok(Stanzas {
            nsds: out,
            pools,
            notes,
        })
    }
}

/// Reports each value of `items` already seen in an earlier stanza (`items`
/// pairs a value with the header line of its stanza).
fn dups<'a>(
    items: impl Iterator<Item = (&'a At, usize)>,
    make: fn(String, usize) -> StanzaErrorKind,
    out: &mut Vec<StanzaError>,
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (at, header) in items {
        let first_line = *seen.entry(at.value.as_str()).or_insert(header);
        if first_line != header {
            let kind = make(at.value.clone(), first_line);
            let (line, key) = (at.line, Some(at.key.clone()));
            out.push(StanzaError { line, key, kind });
        }
    }
}

/// Parses a stanza file; on failure every problem found, sorted by line.
pub fn parse(text: &str) -> Result<Stanzas, Vec<StanzaError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut p = Parser::default();
    let mut continued = false;
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let was_continued = std::mem::take(&mut continued);
        let mut body = raw.trim();
        if body.starts_with('#') {
            continue;
        }
        if let Some(stripped) = body.strip_suffix('\\') {
            body = stripped.trim_end();
            continued = true;
        }
        if !was_continued && body.starts_with('%') {
            p.header(line, body);
        } else {
            p.pairs(line, body);
        }
    }
    p.finish()
}

impl NsdStanza {
    /// This stanza on one line, as [`parse`] reads it back.
    pub fn to_stanza(&self) -> String {
        let mut s = format!("%nsd: nsd={} device={}", self.name, self.device);
        if !self.servers.is_empty() {
            s.push_str(&format!(" servers={}", self.servers.join(",")));
        }
        s.push_str(&format!(" usage={}", self.usage.as_gpfs()));
        if let Some(fg) = self.failure_group {
            s.push_str(&format!(" failureGroup={fg}"));
        }
        s.push_str(&format!(" pool={}", self.pool));
        if let Some(size) = self.size {
            s.push_str(&format!(" size={}", format_size(size)));
        }
        s
    }
}

impl PoolStanza {
    /// This stanza on one line, as [`parse`] reads it back.
    pub fn to_stanza(&self) -> String {
        match self.block_size {
            Some(bs) => format!("%pool: pool={} blockSize={}", self.pool, format_size(bs)),
            None => format!("%pool: pool={}", self.pool),
        }
    }
}

/// The stanzas as a file: one line each, `%nsd:` stanzas first, then `%pool:`.
pub fn render(stanzas: &Stanzas) -> String {
    let nsds = stanzas.nsds.iter().map(NsdStanza::to_stanza);
    let pools = stanzas.pools.iter().map(PoolStanza::to_stanza);
    nsds.chain(pools).map(|l| l + "\n").collect()
}

#[cfg(test)]
mod tests;
