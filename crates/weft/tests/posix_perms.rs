//! POSIX permissions through the mount, as Linux (ext4) enforces them:
//! owner/group/other bits, search permission on every path step,
//! supplementary groups, root, sticky and set-group-id directories, umask,
//! set-user-id clearing, chown and chmod rules. Non-root steps run in a
//! helper process under other credentials (`setpriv`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;

static FX: SharedMount = SharedMount::new("posix-perms", &[]);

/// Two unprivileged users and a group only some helpers are in.
const U1: u32 = 1000;
const U2: u32 = 1001;
const G: u32 = 2000;

#[test]
fn posix_helper() {
    helper_main()
}

fn u1() -> Creds {
    Creds::user(U1, U1)
}
fn u2() -> Creds {
    Creds::user(U2, U2)
}
fn u2_in_g() -> Creds {
    Creds::with_groups(U2, U2, &[G])
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

fn mode_of(path: &Path) -> u32 {
    lstat(path).unwrap().st_mode & 0o7777
}

fn file(path: &Path, mode: u32, uid: u32, gid: u32) {
    std::fs::write(path, b"data").unwrap();
    set_owner(path, uid, gid);
    set_mode(path, mode);
}

fn open_step(path: &Path, flags: i32) -> String {
    step(&[&"open", &p(path), &flags, &"644"])
}

#[test]
fn owner_group_other_bits() {
    let m = FX.get();
    let d = m.dir("bits");
    let f = d.join("f");
    file(&f, 0o640, U1, G);
    let r = &m.root;
    // Owner: read and write.
    let out = run_helper(
        r,
        Some(&u1()),
        &[open_step(&f, libc::O_RDONLY), open_step(&f, libc::O_WRONLY)],
    );
    assert_eq!(out, [Ok(String::new()), Ok(String::new())], "owner");
    // Group member: read only.
    let out = run_helper(
        r,
        Some(&u2_in_g()),
        &[open_step(&f, libc::O_RDONLY), open_step(&f, libc::O_WRONLY)],
    );
    assert_eq!(out, [Ok(String::new()), Err(libc::EACCES)], "group");
    // Other: nothing.
    let out = as_user(r, &u2(), open_step(&f, libc::O_RDONLY));
    assert_eq!(out, Err(libc::EACCES), "other");
    // The group class applies to a member even when "other" allows more.
    let g = d.join("g");
    file(&g, 0o604, U1, G);
    assert_eq!(
        as_user(r, &u2_in_g(), open_step(&g, libc::O_RDONLY)),
        Err(libc::EACCES),
        "group bits, not other bits, for a member"
    );
    assert_eq!(
        as_user(r, &u2(), open_step(&g, libc::O_RDONLY)),
        Ok("".into())
    );
    // The owner class applies to the owner even when group/other allow more.
    let o = d.join("o");
    file(&o, 0o077, U1, U1);
    assert_eq!(
        as_user(r, &u1(), open_step(&o, libc::O_RDONLY)),
        Err(libc::EACCES)
    );
}

#[test]
fn search_permission_on_every_path_step() {
    let m = FX.get();
    let d = m.dir("search");
    let inner = d.join("inner");
    std::fs::create_dir(&inner).unwrap();
    file(&inner.join("f"), 0o644, U1, U1);
    set_owner(&inner, U1, U1);
    set_mode(&inner, 0o700);
    let f = inner.join("f");
    let r = &m.root;
    assert_eq!(
        as_user(r, &u2(), step(&[&"stat", &p(&f)])),
        Err(libc::EACCES)
    );
    assert_eq!(
        as_user(r, &u2(), open_step(&f, libc::O_RDONLY)),
        Err(libc::EACCES)
    );
    assert!(as_user(r, &u1(), step(&[&"stat", &p(&f)])).is_ok());
    // Search without read: names resolve, the listing is refused.
    set_mode(&inner, 0o711);
    assert!(as_user(r, &u2(), step(&[&"stat", &p(&f)])).is_ok());
    assert_eq!(
        as_user(
            r,
            &u2(),
            step(&[&"open", &p(&inner), &libc::O_RDONLY, &"0"])
        ),
        Err(libc::EACCES),
        "opendir without read permission"
    );
    // Read without search: the listing works, names do not resolve.
    set_mode(&inner, 0o744);
    assert_eq!(
        as_user(r, &u2(), step(&[&"stat", &p(&f)])),
        Err(libc::EACCES)
    );
}

#[test]
fn create_and_remove_need_write_and_search_on_the_directory() {
    let m = FX.get();
    let d = m.dir("dirwrite");
    let ro = d.join("ro");
    std::fs::create_dir(&ro).unwrap();
    file(&ro.join("victim"), 0o666, U1, U1);
    set_owner(&ro, U1, U1);
    set_mode(&ro, 0o555);
    let r = &m.root;
    let out = run_helper(
        r,
        Some(&u1()),
        &[
            open_step(&ro.join("new"), libc::O_CREAT | libc::O_WRONLY),
            step(&[&"mkdir", &p(&ro.join("sub")), &"755"]),
            step(&[&"unlink", &p(&ro.join("victim"))]),
            step(&[&"rename", &p(&ro.join("victim")), &p(&ro.join("v2"))]),
            step(&[&"symlink", &"x", &p(&ro.join("l"))]),
        ],
    );
    assert_eq!(out, vec![Err(libc::EACCES); 5]);
    // Writing into the file itself is still allowed: its own mode says so.
    assert!(as_user(
        r,
        &u2(),
        step(&[&"write", &p(&ro.join("victim")), &0, &"x"])
    )
    .is_ok());
    assert!(ro.join("victim").exists());
}

#[test]
fn supplementary_groups_count() {
    let m = FX.get();
    let d = m.dir("supp");
    let shared = d.join("shared");
    std::fs::create_dir(&shared).unwrap();
    set_owner(&shared, 0, G);
    set_mode(&shared, 0o770);
    let r = &m.root;
    let f = shared.join("by-member");
    assert_eq!(
        as_user(r, &u2_in_g(), open_step(&f, libc::O_CREAT | libc::O_WRONLY)),
        Ok("".into())
    );
    let st = lstat(&f).unwrap();
    assert_eq!(
        (st.st_uid, st.st_gid),
        (U2, U2),
        "new files take the creator's ids"
    );
    assert_eq!(
        as_user(
            r,
            &u2(),
            open_step(&shared.join("x"), libc::O_CREAT | libc::O_WRONLY)
        ),
        Err(libc::EACCES)
    );
    // Several supplementary groups: any one of them grants.
    let many = Creds::with_groups(U2, U2, &[3000, 3001, G]);
    assert_eq!(
        as_user(r, &many, step(&[&"stat", &p(&f)])),
        Ok(format!("{:o} {U2} {U2}", st.st_mode))
    );
}

#[test]
fn root_overrides_modes_but_not_missing_execute() {
    let m = FX.get();
    let d = m.dir("root");
    let f = d.join("f");
    file(&f, 0o000, U1, U1);
    let c = cpath(&f);
    // SAFETY: valid path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR) };
    assert!(fd >= 0, "root opens a mode-000 file: errno {}", errno());
    // SAFETY: fd from open above.
    unsafe { libc::close(fd) };
    let closed = d.join("closed");
    std::fs::create_dir(&closed).unwrap();
    set_mode(&closed, 0o000);
    std::fs::write(closed.join("inside"), b"x").unwrap();
    assert_eq!(std::fs::read_dir(&closed).unwrap().count(), 1);
    // Execute needs at least one x bit, even for root.
    set_mode(&f, 0o644);
    // SAFETY: valid path.
    let r = unsafe { libc::access(c.as_ptr(), libc::X_OK) };
    assert_eq!((r, errno()), (-1, libc::EACCES));
    set_mode(&f, 0o100);
    // SAFETY: valid path.
    assert_eq!(unsafe { libc::access(c.as_ptr(), libc::X_OK) }, 0);
}

#[test]
fn sticky_directory_protects_other_users_entries() {
    let m = FX.get();
    let d = m.dir("sticky");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    set_mode(&tmp, 0o1777);
    let r = &m.root;
    let a = tmp.join("a");
    let out = run_helper(
        r,
        Some(&u1()),
        &[
            open_step(&a, libc::O_CREAT | libc::O_WRONLY),
            step(&[&"mkdir", &p(&tmp.join("adir")), &"777"]),
        ],
    );
    assert_eq!(out, [Ok("".into()), Ok("".into())]);
    let out = run_helper(
        r,
        Some(&u2()),
        &[
            step(&[&"unlink", &p(&a)]),
            step(&[&"rename", &p(&a), &p(&tmp.join("b"))]),
            step(&[&"rmdir", &p(&tmp.join("adir"))]),
            // Replacing another user's entry by rename is refused too.
            open_step(&tmp.join("mine"), libc::O_CREAT | libc::O_WRONLY),
            step(&[&"rename", &p(&tmp.join("mine")), &p(&a)]),
            // Own entries may go.
            step(&[&"unlink", &p(&tmp.join("mine"))]),
        ],
    );
    assert_eq!(
        out,
        [
            Err(libc::EPERM),
            Err(libc::EPERM),
            Err(libc::EPERM),
            Ok("".into()),
            Err(libc::EPERM),
            Ok("".into())
        ]
    );
    assert!(a.exists());
    // The directory's owner may remove anyone's entries.
    set_owner(&tmp, U2, U2);
    assert_eq!(as_user(r, &u2(), step(&[&"unlink", &p(&a)])), Ok("".into()));
    // And root may.
    std::fs::remove_dir(tmp.join("adir")).unwrap();
}

#[test]
fn setgid_directory_passes_group_and_bit_on() {
    let m = FX.get();
    let d = m.dir("setgid");
    let sg = d.join("sg");
    std::fs::create_dir(&sg).unwrap();
    set_owner(&sg, 0, G);
    set_mode(&sg, 0o2777);
    std::fs::write(sg.join("by-root"), b"x").unwrap();
    assert_eq!(std::fs::metadata(sg.join("by-root")).unwrap().gid(), G);
    let r = &m.root;
    let out = run_helper(
        r,
        Some(&u1()),
        &[
            open_step(&sg.join("by-u1"), libc::O_CREAT | libc::O_WRONLY),
            step(&[&"mkdir", &p(&sg.join("sub")), &"755"]),
            step(&[&"mknod", &p(&sg.join("fifo")), &"10644", &0]),
        ],
    );
    assert!(out.iter().all(|s| s.is_ok()), "{out:?}");
    let f = std::fs::metadata(sg.join("by-u1")).unwrap();
    assert_eq!((f.uid(), f.gid()), (U1, G));
    assert_eq!(f.mode() & 0o7777, 0o644 & !0o022);
    let sub = std::fs::metadata(sg.join("sub")).unwrap();
    assert_eq!(sub.gid(), G);
    assert_eq!(
        sub.mode() & 0o7777,
        0o2755,
        "subdirectories inherit set-group-id"
    );
    assert_eq!(std::fs::metadata(sg.join("fifo")).unwrap().gid(), G);
    // Deeper: the inherited bit keeps passing the group on.
    std::fs::create_dir(sg.join("sub/deeper")).unwrap();
    let deeper = std::fs::metadata(sg.join("sub/deeper")).unwrap();
    assert_eq!((deeper.gid(), deeper.mode() & 0o2000), (G, 0o2000));
    // A non-member creating a set-group-id executable there loses the bit.
    let out = as_user(
        r,
        &u2(),
        step(&[
            &"open",
            &p(&sg.join("sgid-exec")),
            &(libc::O_CREAT | libc::O_WRONLY),
            &"2755",
        ]),
    );
    assert!(out.is_ok(), "{out:?}");
    assert_eq!(mode_of(&sg.join("sgid-exec")), 0o755);
}

#[test]
fn umask_is_honoured() {
    let m = FX.get();
    let d = m.dir("umask");
    let r = &m.root;
    let out = run_helper(
        r,
        Some(&u1()),
        &[
            step(&[&"umask", &"027"]),
            step(&[
                &"open",
                &p(&d.join("f")),
                &(libc::O_CREAT | libc::O_WRONLY),
                &"666",
            ]),
            step(&[&"mkdir", &p(&d.join("dir")), &"777"]),
            step(&[&"mknod", &p(&d.join("fifo")), &"10666", &0]),
            step(&[&"umask", &"0"]),
            step(&[
                &"open",
                &p(&d.join("g")),
                &(libc::O_CREAT | libc::O_WRONLY),
                &"666",
            ]),
        ],
    );
    assert!(out.iter().all(|s| s.is_ok()), "{out:?}");
    assert_eq!(mode_of(&d.join("f")), 0o640);
    assert_eq!(mode_of(&d.join("dir")), 0o750);
    assert_eq!(mode_of(&d.join("fifo")), 0o640);
    assert_eq!(mode_of(&d.join("g")), 0o666);
    // Symlinks are always 0777.
    std::os::unix::fs::symlink("target", d.join("l")).unwrap();
    assert_eq!(mode_of(&d.join("l")), 0o777);
}

#[test]
fn write_and_truncate_by_non_root_clear_setuid() {
    let m = FX.get();
    let d = m.dir("killsuid");
    let r = &m.root;
    let w = d.join("w");
    file(&w, 0o6777, U1, G);
    assert_eq!(
        as_user(r, &u2(), step(&[&"write", &p(&w), &0, &"xy"])),
        Ok("2".into())
    );
    assert_eq!(
        mode_of(&w),
        0o777,
        "write clears set-user-id and (group-exec) set-group-id"
    );
    let t = d.join("t");
    file(&t, 0o4777, U1, G);
    assert_eq!(
        as_user(r, &u2(), step(&[&"truncate", &p(&t), &1])),
        Ok("".into())
    );
    assert_eq!(mode_of(&t), 0o777, "truncate clears set-user-id");
    // set-group-id without group-execute (mandatory locking marker) stays.
    let k = d.join("k");
    file(&k, 0o2666, U1, G);
    assert!(as_user(r, &u2(), step(&[&"write", &p(&k), &0, &"z"])).is_ok());
    assert_eq!(mode_of(&k), 0o2666);
}

/// pjdfstest `chmod/12.t`: a file root made set-user-ID or set-group-ID
/// (with group-execute) and another user writes loses those bits at once:
/// the writer's own `fstat` before its close shows them gone, and so does
/// a later `stat`.
#[test]
fn write_by_non_owner_clears_setid_before_close() {
    let m = FX.get();
    let d = m.dir("killsuid_fstat");
    let r = &m.root;
    for (i, mode) in [0o4777, 0o2777, 0o6777].into_iter().enumerate() {
        let f = d.join(format!("f{i}"));
        std::fs::File::create(&f).unwrap();
        set_mode(&f, mode);
        assert_eq!(mode_of(&f), mode);
        assert_eq!(
            as_user(r, &u2(), step(&[&"write_fstat", &p(&f), &0, &"x"])),
            Ok("777".into()),
            "mode {mode:o}: the writer's fstat after its write"
        );
        assert_eq!(mode_of(&f), 0o777, "mode {mode:o}: stat after the close");
    }
}

#[test]
fn chown_rules() {
    let m = FX.get();
    let d = m.dir("chown");
    let f = d.join("f");
    file(&f, 0o644, U1, U1);
    let r = &m.root;
    let u1g = Creds::with_groups(U1, U1, &[G]);
    let fp = p(&f);
    let out = run_helper(
        r,
        Some(&u1g),
        &[
            // Only root gives a file away.
            step(&[&"chown", &fp, &U2, &-1]),
            // Owner may change the group to one of its groups...
            step(&[&"chown", &fp, &-1, &G]),
            // ...but not to another group.
            step(&[&"chown", &fp, &-1, &U2]),
            // Owner "changing" the owner to itself is allowed.
            step(&[&"chown", &fp, &U1, &-1]),
        ],
    );
    assert_eq!(
        out,
        [
            Err(libc::EPERM),
            Ok("".into()),
            Err(libc::EPERM),
            Ok("".into())
        ]
    );
    assert_eq!(std::fs::metadata(&f).unwrap().gid(), G);
    // A non-owner may not change the group, even to its own.
    assert_eq!(
        as_user(r, &u2_in_g(), step(&[&"chown", &fp, &-1, &G])),
        Err(libc::EPERM)
    );
    // Root may do anything.
    set_owner(&f, U2, 4242);
    let md = std::fs::metadata(&f).unwrap();
    assert_eq!((md.uid(), md.gid()), (U2, 4242));
}

#[test]
fn chown_clears_setuid_bits() {
    let m = FX.get();
    let d = m.dir("chownsuid");
    let r = &m.root;
    let u1g = Creds::with_groups(U1, U1, &[G]);
    // Owner changes the group: set-user-id and set-group-id (with group
    // execute) go.
    let f = d.join("f");
    file(&f, 0o6755, U1, U1);
    assert_eq!(
        as_user(r, &u1g, step(&[&"chown", &p(&f), &-1, &G])),
        Ok("".into())
    );
    assert_eq!(mode_of(&f), 0o755);
    // Root chown of a regular file clears set-user-id too (Linux).
    let g = d.join("g");
    file(&g, 0o4755, U1, U1);
    set_owner(&g, U2, U2);
    assert_eq!(mode_of(&g), 0o755);
    // Directories keep their bits.
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    set_mode(&sub, 0o2775);
    set_owner(&sub, U1, G);
    assert_eq!(mode_of(&sub), 0o2775);
}

#[test]
fn chmod_rules() {
    let m = FX.get();
    let d = m.dir("chmod");
    let f = d.join("f");
    file(&f, 0o644, U1, G);
    let r = &m.root;
    let fp = p(&f);
    // Only the owner (or root) changes the mode.
    assert_eq!(
        as_user(r, &u2_in_g(), step(&[&"chmod", &fp, &"600"])),
        Err(libc::EPERM)
    );
    // An owner outside the file's group cannot set set-group-id: it is dropped.
    assert_eq!(
        as_user(r, &u1(), step(&[&"chmod", &fp, &"2755"])),
        Ok("".into())
    );
    assert_eq!(mode_of(&f), 0o755);
    // Inside the group it sticks.
    let u1g = Creds::with_groups(U1, U1, &[G]);
    assert_eq!(
        as_user(r, &u1g, step(&[&"chmod", &fp, &"2755"])),
        Ok("".into())
    );
    assert_eq!(mode_of(&f), 0o2755);
    // Sticky and set-user-id bits are kept exactly.
    set_mode(&f, 0o5711);
    assert_eq!(mode_of(&f), 0o5711);
}

#[test]
fn utimes_rules() {
    let m = FX.get();
    let d = m.dir("utimes");
    let f = d.join("f");
    file(&f, 0o666, U1, U1);
    let g = d.join("g");
    file(&g, 0o644, U1, U1);
    let r = &m.root;
    let out = run_helper(
        r,
        Some(&u2()),
        &[
            // A writer may set both times to now...
            step(&[&"utimens", &p(&f), &"now", &"now"]),
            // ...but only the owner may set explicit times.
            step(&[&"utimens", &p(&f), &"5.0", &"6.0"]),
            // Without write permission not even "now".
            step(&[&"utimens", &p(&g), &"now", &"now"]),
        ],
    );
    assert_eq!(out, [Ok("".into()), Err(libc::EPERM), Err(libc::EACCES)]);
    assert_eq!(
        as_user(r, &u1(), step(&[&"utimens", &p(&g), &"5.0", &"6.0"])),
        Ok("".into())
    );
    let md = std::fs::metadata(&g).unwrap();
    assert_eq!((md.atime(), md.mtime()), (5, 6));
}
