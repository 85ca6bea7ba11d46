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

mod error;
mod values;

pub use error::{render_errors, StanzaError, StanzaErrorKind};
use values::*;
use StanzaErrorKind as K;

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
