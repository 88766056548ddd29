use super::*;
use std::os::unix::fs::symlink;

/// A tree with a host folder beside it that links must never reach.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    let host = d.path().join("host");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("secret.json"), b"host only").unwrap();
    (d, tree, host)
}

#[test]
fn links_are_refused_at_every_component() {
    let (_d, tree, host) = setup();
    symlink(&host, tree.join("linked")).unwrap();
    symlink(host.join("secret.json"), tree.join("sub/file.json")).unwrap();
    let dir = Dir::open(&tree).unwrap();
    for rel in ["linked/secret.json", "sub/file.json"] {
        let e = dir.read(rel, 1 << 20).unwrap_err();
        assert!(is_planted(&e), "{rel}: {e}");
    }
    assert!(is_planted(&dir.open_dir("linked").unwrap_err()));
    assert!(
        dir.read("../host/secret.json", 1 << 20).is_err(),
        "no escape by .."
    );
    assert!(dir.open_dir("/etc").is_err(), "no absolute path");
    // The host folder was never touched.
    assert_eq!(
        std::fs::read(host.join("secret.json")).unwrap(),
        b"host only"
    );
}

#[test]
fn a_replaced_folder_is_made_real_again_and_nothing_is_lost() {
    let (_d, tree, host) = setup();
    let dir = Dir::open(&tree).unwrap();
    symlink(&host, tree.join("tasks")).unwrap();
    std::fs::write(tree.join("errors"), b"agent's file").unwrap();
    let (tasks, replaced) = dir.ensure_dir("tasks").unwrap();
    assert!(replaced);
    assert!(tasks.pending().is_empty(), "the host folder is not listed");
    let (_, replaced) = dir.ensure_dir("errors").unwrap();
    assert!(replaced);
    let kept: Vec<_> = dir
        .entries()
        .unwrap()
        .into_iter()
        .filter(|e| e.name.starts_with(".errors.displaced-"))
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "the file in the folder's place is kept aside"
    );
    assert!(
        !std::fs::symlink_metadata(tree.join("tasks"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_dir(&host).unwrap().count(), 1);
    let (_, replaced) = dir.ensure_dir("tasks").unwrap();
    assert!(!replaced, "a real folder stays");
    let (deep, _) = dir.ensure_path(Path::new("a/b/c")).unwrap();
    deep.write_atomic("x.json", b"{}").unwrap();
    assert_eq!(std::fs::read(tree.join("a/b/c/x.json")).unwrap(), b"{}");
}

#[test]
fn writes_renames_and_removes_never_follow_links() {
    let (_d, tree, host) = setup();
    let dir = Dir::open(&tree).unwrap();
    let sub = dir.open_dir("sub").unwrap();
    symlink(host.join("secret.json"), tree.join("sub/out.json")).unwrap();
    sub.write_atomic("out.json", b"{}").unwrap();
    assert_eq!(
        std::fs::read(host.join("secret.json")).unwrap(),
        b"host only"
    );
    assert_eq!(sub.read("out.json", 10).unwrap(), b"{}");
    symlink(host.join("secret.json"), tree.join("sub/new.md")).unwrap();
    assert!(
        !sub.create_new("new.md", b"x").unwrap(),
        "a link is something: not replaced"
    );
    assert_eq!(
        std::fs::read(host.join("secret.json")).unwrap(),
        b"host only"
    );
    sub.remove("new.md").unwrap();
    assert!(
        host.join("secret.json").exists(),
        "the link went, not its target"
    );
    sub.rename_to("out.json", &dir, "moved.json").unwrap();
    assert_eq!(dir.pending(), ["moved.json"]);
    let name = dir
        .write_new(
            ["a.md".to_string(), "b.md".to_string()].into_iter(),
            b"one",
            &|n| n == "a.md",
        )
        .unwrap();
    assert_eq!(name, "b.md");
    let name = dir
        .write_new(
            ["b.md".to_string(), "c.md".to_string()].into_iter(),
            b"two",
            &|_| false,
        )
        .unwrap();
    assert_eq!(name, "c.md", "never replaces");
    assert_eq!(std::fs::read(tree.join("b.md")).unwrap(), b"one");
    assert!(
        dir.entries()
            .unwrap()
            .iter()
            .all(|e| !e.name.ends_with(".tmp")),
        "no temp file left"
    );
    assert!(sub.rename_to("../x", &dir, "y").is_err());
}

#[test]
fn a_pending_file_takes_its_name_only_when_settled() {
    let (_d, tree, _host) = setup();
    let dir = Dir::open(&tree).unwrap();
    std::fs::write(tree.join("a.md"), b"the agent's").unwrap();
    std::fs::write(tree.join(".b.md.pending"), b"an earlier one").unwrap();
    let names = || ["a.md", "b.md", "c.md"].map(String::from).into_iter();
    // a.md and b.md's pending form are taken: c.md waits.
    let name = dir.write_pending(names(), b"new", &|_| false).unwrap();
    assert_eq!(name, "c.md");
    assert!(!tree.join("c.md").exists());
    assert_eq!(std::fs::read(tree.join(".c.md.pending")).unwrap(), b"new");
    assert_eq!(dir.entries().unwrap().len(), 4, "no temp file left");
    assert!(dir.settle("c.md").unwrap());
    assert_eq!(std::fs::read(tree.join("c.md")).unwrap(), b"new");
    // A name taken meanwhile is never replaced.
    let name = dir
        .write_pending(["d.md".to_string()].into_iter(), b"two", &|_| false)
        .unwrap();
    std::fs::write(tree.join(&name), b"raced").unwrap();
    assert!(!dir.settle(&name).unwrap());
    assert_eq!(std::fs::read(tree.join("d.md")).unwrap(), b"raced");
    // What a crash can leave is recognised, nothing else.
    assert_eq!(leftover(".c.md.pending"), Some(Leftover::Pending("c.md")));
    assert_eq!(leftover(".pending.0123456789ab.tmp"), Some(Leftover::Temp));
    for other in [
        "c.md",
        ".pending",
        "..md.pending",
        ".pending.xyz.tmp",
        ".a/b.pending",
    ] {
        assert_eq!(leftover(other), None, "{other}");
    }
}

#[test]
fn writers_racing_for_one_name_each_settle_their_own() {
    let (_d, tree, _host) = setup();
    let (threads, rounds) = (8, 40);
    let names = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let dir = Dir::open(&tree).unwrap();
                    let mut mine = Vec::new();
                    for _ in 0..rounds {
                        let candidates = (1..10_000).map(|n| format!("r-{n}.md"));
                        let name = dir.write_pending(candidates, b"x", &|_| false).unwrap();
                        // Nobody else settles under a name this writer holds.
                        assert!(dir.settle(&name).unwrap(), "{name} was taken");
                        mine.push(name);
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), threads * rounds);
}

#[test]
fn what_a_handle_creates_belongs_to_its_owner() {
    use std::os::unix::fs::MetadataExt;
    let (_d, tree, _host) = setup();
    let me = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    // Giving to oneself works as any user; root may give to anyone.
    let owner = if me.0 == 0 { (1234, 1234) } else { me };
    let dir = Dir::open(&tree).unwrap().owned_by(owner.0, owner.1);
    let (sub, _) = dir.ensure_dir("made").unwrap();
    sub.write_atomic("f.json", b"{}").unwrap();
    sub.create_new("g.md", b"x").unwrap();
    for p in ["made", "made/f.json", "made/g.md"] {
        let m = std::fs::metadata(tree.join(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), owner, "{p}");
    }
}
