use proptest::prelude::*;

use super::*;

fn errs(text: &str) -> Vec<StanzaError> {
    parse(text).unwrap_err()
}

/// The only error of a file, which must have exactly one.
fn one_err(text: &str) -> StanzaError {
    let e = errs(text);
    assert_eq!(e.len(), 1, "{e:#?}");
    e.into_iter().next().unwrap()
}

#[test]
fn realistic_file() {
    let text = "\
# Weft test cluster, three disks
\u{20}
%nsd: nsd=nsd1 device=/srv/weft/nsd1 servers=h1,h2 usage=dataAndMetadata failureGroup=1 pool=system
%nsd:
  nsd=nsd2
  device=/srv/weft/nsd2
  servers=10.0.0.2
  usage=dataOnly failureGroup=2 pool=data
# a comment between stanzas
%nsd: nsd=\"fast1\" \\
      device=\"/srv/weft/fast1\" servers=h3 \\
      USAGE=MetadataOnly FailureGroup=3 size=200G thinDiskType=nvme  # trailing comment
%pool: pool=data blockSize=4M layoutMap=cluster writeAffinityDepth=1
%pool:\r
  pool=system\r
";
    let s = parse(text).unwrap();
    assert_eq!(
        s.nsds,
        vec![
            NsdStanza {
                name: "nsd1".into(),
                device: "/srv/weft/nsd1".into(),
                servers: vec!["h1".into(), "h2".into()],
                usage: StanzaUsage::DataAndMetadata,
                failure_group: Some(1),
                pool: "system".into(),
                size: None,
                line: 3,
            },
            NsdStanza {
                name: "nsd2".into(),
                device: "/srv/weft/nsd2".into(),
                servers: vec!["10.0.0.2".into()],
                usage: StanzaUsage::DataOnly,
                failure_group: Some(2),
                pool: "data".into(),
                size: None,
                line: 4,
            },
            NsdStanza {
                name: "fast1".into(),
                device: "/srv/weft/fast1".into(),
                servers: vec!["h3".into()],
                usage: StanzaUsage::MetadataOnly,
                failure_group: Some(3),
                pool: "system".into(),
                size: Some(200 << 30),
                line: 10,
            },
        ]
    );
    assert_eq!(
        s.pools,
        vec![
            PoolStanza {
                pool: "data".into(),
                block_size: Some(4 << 20),
                line: 13
            },
            PoolStanza {
                pool: "system".into(),
                block_size: None,
                line: 14
            },
        ]
    );
    let notes: Vec<String> = s.notes.iter().map(|n| n.to_string()).collect();
    assert_eq!(notes.len(), 3, "{notes:#?}");
    assert!(
        notes[0].starts_with("line 12: thinDiskType=nvme is ignored"),
        "{notes:#?}"
    );
    assert!(
        notes[1].starts_with("line 13: layoutMap=cluster is ignored"),
        "{notes:#?}"
    );
    assert!(
        notes[2].starts_with("line 13: writeAffinityDepth=1 is ignored"),
        "{notes:#?}"
    );
}

#[test]
fn defaults() {
    let s = parse("%nsd: device=/d").unwrap();
    let n = &s.nsds[0];
    assert_eq!(n.name, "nsd1");
    assert!(n.servers.is_empty());
    assert_eq!(n.usage, StanzaUsage::DataAndMetadata);
    assert_eq!(n.failure_group, None);
    assert_eq!(n.pool, "system");
    assert_eq!(n.size, None);
    assert!(s.notes.is_empty());
}

#[test]
fn header_without_space_and_mixed_case() {
    let s = parse("%NSD:nsd=a device=/a\n%Pool:pool=p").unwrap();
    assert_eq!(s.nsds[0].name, "a");
    assert_eq!(s.pools[0].pool, "p");
}

#[test]
fn usage_maps_to_config() {
    assert_eq!(
        StanzaUsage::DataAndMetadata.to_config(),
        Usage::DataAndMetadata
    );
    assert_eq!(StanzaUsage::DataOnly.to_config(), Usage::DataOnly);
    assert_eq!(StanzaUsage::MetadataOnly.to_config(), Usage::MetadataOnly);
}

#[test]
fn sizes() {
    for (text, n) in [
        ("4096", 4096u64),
        ("512B", 512),
        ("512M", 512 << 20),
        ("512m", 512 << 20),
        ("200G", 200 << 30),
        ("200GiB", 200 << 30),
        ("200gb", 200 << 30),
        ("1T", 1 << 40),
        ("2P", 2 << 50),
        ("64K", 64 << 10),
        ("64KB", 64 << 10),
    ] {
        assert_eq!(parse_size(text), Ok(n), "{text}");
        assert_eq!(parse_size(&format_size(n)), Ok(n), "{text}");
    }
    for bad in [
        "",
        "G",
        "1.5G",
        "12X",
        "1iB",
        "0",
        "0G",
        "99999999999999999999",
        "20000P",
        "1 G",
    ] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    assert_eq!(format_size(4 << 20), "4M");
    assert_eq!(format_size(1000), "1000");
}

#[test]
fn generated_names() {
    // Stanza 1 wants nsd1, taken by stanza 2: it gets the next free number.
    let s = parse("%nsd: device=/a\n%nsd: nsd=nsd1 device=/b\n%nsd: device=/c\n%nsd: nsd=nsd4 device=/d\n%nsd: device=/e")
        .unwrap();
    let names: Vec<&str> = s.nsds.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["nsd2", "nsd1", "nsd3", "nsd4", "nsd5"]);
    // nsd3 is both wanted by stanza 3 and written by stanza 4.
    let s = parse("%nsd: device=/a\n%nsd: device=/b\n%nsd: device=/c\n%nsd: nsd=nsd3 device=/d")
        .unwrap();
    let names: Vec<&str> = s.nsds.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["nsd1", "nsd2", "nsd4", "nsd3"]);
}

#[test]
fn example_message() {
    let e = one_err("%nsd: nsd=a device=/a\n\n  failureGroup=abc\n");
    assert_eq!((e.line, e.key.as_deref()), (3, Some("failureGroup")));
    assert_eq!(
        e.to_string(),
        "line 3: failureGroup=abc is not a number: write failureGroup=N with N from 0 to 2147483647"
    );
}

#[test]
fn each_error_kind() {
    use StanzaErrorKind as K;
    let cases: Vec<(&str, usize, Option<&str>, K, &str)> = vec![
        (
            "%nsd: device=/a\n colour=red",
            2,
            Some("colour"),
            K::UnknownKey {
                stanza: StanzaType::Nsd,
            },
            "unknown key",
        ),
        (
            "%nsd: device=/a\n%pool: pool=p device=/x",
            2,
            Some("device"),
            K::UnknownKey {
                stanza: StanzaType::Pool,
            },
            "pool=",
        ),
        (
            "%nsd: device=/a servers=",
            1,
            Some("servers"),
            K::MissingValue,
            "servers has no value: write servers=NODE",
        ),
        (
            "%nsd: device=/a\nservers",
            2,
            Some("servers"),
            K::MissingValue,
            "servers has no value",
        ),
        (
            "%nsd: device=/a nsd=\"\"",
            1,
            Some("nsd"),
            K::MissingValue,
            "nsd has no value",
        ),
        (
            "%nsd: nsd=x\n\n",
            1,
            None,
            K::MissingDevice,
            "has no device: write device=/absolute/path",
        ),
        (
            "%nsd: device=/a\n%pool: blockSize=1M",
            2,
            None,
            K::MissingPoolName,
            "write pool=NAME",
        ),
        (
            "%nsd: device=/a\n pool=a pool=b",
            2,
            Some("pool"),
            K::DuplicateKey { first_line: 2 },
            "pool is given twice",
        ),
        (
            "%nsd: device=/a\n Device=/b",
            2,
            Some("Device"),
            K::DuplicateKey { first_line: 1 },
            "first on line 1",
        ),
        (
            "%nsd: nsd=a device=/a\n%nsd: device=/b\n nsd=a",
            3,
            Some("nsd"),
            K::DuplicateName {
                name: "a".into(),
                first_line: 1,
            },
            "NSD name a is already used by the stanza on line 1",
        ),
        (
            "%nsd: device=/a\n%nsd:\n DEVICE=/a",
            3,
            Some("DEVICE"),
            K::DuplicateDevice {
                device: "/a".into(),
                first_line: 1,
            },
            "device /a is already used by the stanza on line 1",
        ),
        (
            "%nsd: device=/a\n%pool: pool=p\n%pool: pool=p",
            3,
            Some("pool"),
            K::DuplicatePool {
                pool: "p".into(),
                first_line: 2,
            },
            "pool p is already used by the stanza on line 2",
        ),
        (
            "hello world\n%nsd: device=/a",
            1,
            None,
            K::NotAStanza {
                text: "hello world".into(),
            },
            "comes before any stanza",
        ),
        (
            "%nsd: device=/a\n%filesystem: device=gpfs1\n  foo=bar",
            2,
            None,
            K::UnknownStanzaType {
                ty: "filesystem".into(),
            },
            "%filesystem: stanzas are not supported",
        ),
        (
            "%nsd device=/a",
            1,
            None,
            K::BadHeader {
                text: "%nsd".into(),
            },
            "with the colon",
        ),
        (
            "%nsd: device=/a\n%: x=y",
            2,
            None,
            K::BadHeader { text: "%:".into() },
            "is not a stanza header",
        ),
        (
            "%nsd: device=/a /dev/sdb",
            1,
            None,
            K::NotKeyValue {
                token: "/dev/sdb".into(),
            },
            "is not a key=value pair",
        ),
        (
            "%nsd: device=/a =x",
            1,
            None,
            K::NotKeyValue { token: "=x".into() },
            "is not a key=value pair",
        ),
        (
            "# nothing\n\n",
            0,
            None,
            K::Empty,
            "the stanza file has no %nsd: stanza",
        ),
        ("%pool: pool=p", 0, None, K::Empty, "has no %nsd: stanza"),
    ];
    for (text, line, key, kind, msg) in cases {
        let e = one_err(text);
        assert_eq!(
            (e.line, e.key.as_deref(), &e.kind),
            (line, key, &kind),
            "{text:?}"
        );
        assert!(e.to_string().contains(msg), "{text:?}: {e}");
        if line > 0 {
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
    }
}

#[test]
fn bad_values() {
    let cases = [
        ("nsd=1abc", "does not start with a letter"),
        ("nsd=a/b", "contains the character '/'"),
        (
            "nsd=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "longer than 64",
        ),
        ("device=srv/a", "is not an absolute path"),
        ("device=\"/a", "unbalanced double quote"),
        ("servers=h1,,h2", "empty server name"),
        ("servers=h1,H1", "names server H1 twice"),
        ("servers=h1,h!", "with the character '!'"),
        ("usage=descOnly", "is not supported"),
        ("usage=everything", "is not a disk usage"),
        ("failureGroup=-1", "is negative"),
        ("failureGroup=2147483648", "out of range"),
        ("failureGroup=1,0,1", "topology vector"),
        ("failureGroup=abc", "is not a number"),
        ("pool=_p", "does not start with a letter"),
        ("thinDiskType=yes", "is not a thin disk type"),
        ("size=12X", "unknown unit"),
        ("size=0", "is zero"),
    ];
    for (pair, why) in cases {
        let text = if pair.starts_with("device") {
            format!("%nsd: {pair}")
        } else {
            format!("%nsd: device=/a {pair}")
        };
        let e = one_err(&text);
        let key = pair.split('=').next().unwrap();
        assert_eq!((e.line, e.key.as_deref()), (1, Some(key)), "{pair}");
        assert!(matches!(e.kind, StanzaErrorKind::BadValue { .. }), "{pair}");
        let msg = e.to_string();
        assert!(
            msg.contains(why) && msg.contains(": write "),
            "{pair}: {msg}"
        );
    }
    let e = one_err("%nsd: device=/a\n%pool: pool=p blockSize=3M");
    assert_eq!((e.line, e.key.as_deref()), (2, Some("blockSize")));
    assert!(
        e.to_string().contains("power of two from 64K to 16M"),
        "{e}"
    );
    let e = one_err("%nsd: device=/a usage=descOnly");
    assert_eq!(
        e.to_string(),
        "line 1: usage=descOnly is not supported: Weft keeps no file system descriptor copies on \
         separate disks: write usage=dataAndMetadata, usage=dataOnly or usage=metadataOnly"
    );
}

#[test]
fn every_error_is_reported() {
    let text = "\
stray text
%nsd: nsd=good device=/a servers=h1
%nsd: nsd=9bad device=relative
  failureGroup=-3 usage=descOnly
  bogus=1
%nsd: nsd=good servers=h1,h1
%nsd: nsd=other device=/a
%filesystem: device=gpfs1
";
    let e = errs(text);
    let got: Vec<(usize, Option<&str>)> = e.iter().map(|e| (e.line, e.key.as_deref())).collect();
    assert_eq!(
        got,
        [
            (1, None),
            (3, Some("nsd")),
            (3, Some("device")),
            (4, Some("failureGroup")),
            (4, Some("usage")),
            (5, Some("bogus")),
            (6, Some("servers")),
            (6, None),
            (6, Some("nsd")),
            (7, Some("device")),
            (8, None),
        ],
        "{e:#?}"
    );
    let msg = render_errors(&e);
    assert!(
        msg.starts_with("11 problems in the stanza file:\n  line 1: "),
        "{msg}"
    );
    assert_eq!(msg.lines().count(), 12);
    assert_eq!(
        render_errors(&e[..1]).lines().next(),
        Some("1 problem in the stanza file:")
    );
}

#[test]
fn backslash_line_is_not_a_header() {
    let e = errs("%nsd: device=/a \\\n%nsd: nsd=b");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].line, 2);
    assert!(matches!(e[0].kind, StanzaErrorKind::NotKeyValue { .. }));
}

#[test]
fn render_round_trip_example() {
    let s = parse(
        "%nsd: device=/a servers=h1,h2 size=1536M failureGroup=0\n%pool: pool=p blockSize=256K",
    )
    .unwrap();
    let text = render(&s);
    assert_eq!(
        text,
        "%nsd: nsd=nsd1 device=/a servers=h1,h2 usage=dataAndMetadata failureGroup=0 pool=system size=1536M\n\
         %pool: pool=p blockSize=256K\n"
    );
    assert_eq!(parse(&text).unwrap(), s);
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9_.-]{0,20}"
}

fn nsd_stanza() -> impl Strategy<Value = NsdStanza> {
    let usage = prop_oneof![
        Just(StanzaUsage::DataAndMetadata),
        Just(StanzaUsage::DataOnly),
        Just(StanzaUsage::MetadataOnly)
    ];
    (
        name(),
        "(/[a-z0-9_.-]{1,8}){1,3}",
        prop::collection::btree_set(
            "[a-z][a-z0-9.-]{0,10}|[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
            0..4,
        ),
        usage,
        proptest::option::of(0..=MAX_FAILURE_GROUP),
        name(),
        proptest::option::of(1u64..),
    )
        .prop_map(
            |(name, device, servers, usage, failure_group, pool, size)| NsdStanza {
                name,
                device,
                servers: servers.into_iter().collect(),
                usage,
                failure_group,
                pool,
                size,
                line: 0,
            },
        )
}

fn pool_stanza() -> impl Strategy<Value = PoolStanza> {
    (name(), proptest::option::of(16u32..=24)).prop_map(|(pool, bs)| PoolStanza {
        pool,
        block_size: bs.map(|b| 1u64 << b),
        line: 0,
    })
}

/// Tokens that look like stanza files, to reach deep into the parser.
fn stanza_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("%nsd:".to_string()),
        Just("%pool:".to_string()),
        Just("%filesystem:".to_string()),
        Just("%nsd".to_string()),
        Just("\n".to_string()),
        Just("\\\n".to_string()),
        Just("#".to_string()),
        Just("\"".to_string()),
        "(nsd|device|servers|usage|failureGroup|pool|size|blockSize|thinDiskType|layoutMap|x)=[^ \n]{0,12}",
        "[^\n]{0,10}",
    ];
    prop::collection::vec(token, 0..40).prop_map(|t| t.join(" "))
}

proptest! {
    #[test]
    fn never_panics(text in any::<String>()) {
        let _ = parse(&text).map_err(|e| render_errors(&e));
    }

    #[test]
    fn never_panics_on_stanza_like_text(text in stanza_soup()) {
        match parse(&text) {
            Ok(s) => prop_assert!(!s.nsds.is_empty()),
            Err(e) => {
                prop_assert!(!e.is_empty());
                prop_assert!(e.windows(2).all(|w| w[0].line <= w[1].line));
                let _ = render_errors(&e);
            }
        }
    }

    #[test]
    fn rendered_stanzas_parse_back(
        nsds in prop::collection::vec(nsd_stanza(), 1..8),
        pools in prop::collection::vec(pool_stanza(), 0..4),
    ) {
        let mut s = Stanzas { nsds, pools, notes: Vec::new() };
        // Names, devices and pools must be unique in a valid file.
        for (i, n) in s.nsds.iter_mut().enumerate() {
            n.name = format!("{}{i}", n.name.chars().take(60).collect::<String>());
            n.device = format!("{}/{i}", n.device);
            n.line = i + 1;
        }
        let first_pool_line = s.nsds.len() + 1;
        for (i, p) in s.pools.iter_mut().enumerate() {
            p.pool = format!("{}{i}", p.pool);
            p.line = first_pool_line + i;
        }
        let back = parse(&render(&s));
        prop_assert_eq!(back, Ok(s));
    }
}
