use super::*;

#[test]
fn elf_interpreter_detection() {
    let exe = std::env::current_exe().unwrap();
    // Test binaries are linked dynamically on this target.
    assert!(is_dynamic(&exe).unwrap());
    if let Some(bb) = find_busybox() {
        assert!(!is_dynamic(&bb).unwrap(), "busybox-static is static");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x");
    std::fs::write(&f, b"#!/bin/sh\n").unwrap();
    assert!(is_dynamic(&f).is_err());
}

#[test]
fn ldd_lists_absolute_paths() {
    let libs = libraries_of(Path::new("/bin/sh")).unwrap();
    assert!(libs.iter().all(|l| l.is_absolute()));
    assert!(libs.iter().any(|l| l.to_string_lossy().contains("libc.so")));
}

#[test]
fn every_file_of_container_rootfs_goes_into_the_image() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../container/rootfs");
    let mut on_disk = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(&root).unwrap().to_owned();
                on_disk.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    on_disk.sort();
    let mut listed: Vec<String> = ROOTFS_FILES.iter().map(|(p, _)| p.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "container/rootfs/ and ROOTFS_FILES differ");
}

#[test]
fn the_context_holds_the_rootfs_files_with_the_agents_ids() {
    let d = tempfile::tempdir().unwrap();
    let make = |name: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, name.as_bytes()).unwrap();
        p
    };
    let inputs = Inputs {
        agent: make("g2-agent"),
        claude: make("claude"),
        busybox: make("busybox"),
        bash: make("bash"),
        libraries: vec![make("libx.so")],
        ca_certificates: None,
        uid: 1234,
        gid: 5678,
    };
    let digest = inputs.digest().unwrap();
    let mut tar_bytes = Vec::new();
    inputs.write_context(&mut tar_bytes, &digest).unwrap();
    let mut entries = BTreeMap::new();
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().to_string_lossy().into_owned();
        let mut body = String::new();
        if e.header().entry_type().is_file() {
            std::io::Read::read_to_string(&mut e, &mut body).unwrap();
        }
        entries.insert(path, (body, e.header().uid().ok()));
    }
    let passwd = &entries["rootfs/etc/passwd"].0;
    assert!(
        passwd.contains(&format!("{AGENT_USER}:x:1234:5678:g2 agent:{AGENT_HOME}:")),
        "{passwd}"
    );
    assert_eq!(entries["rootfs/etc/group"].0, "root:x:0:\nnode:x:5678:\n");
    assert_eq!(entries["rootfs/usr/local/bin/g2-agent"].0, "g2-agent");
    assert_eq!(
        entries["rootfs/workspace/group"].1,
        Some(1234),
        "the agent's own"
    );
    assert!(entries.contains_key("rootfs/workspace/ipc"));
    assert!(
        entries["Dockerfile"]
            .0
            .ends_with(&format!("LABEL {INPUTS_LABEL}=\"{digest}\"\n"))
    );
    // The ids are inputs: other ids, another image.
    let other = Inputs {
        uid: 1000,
        ..inputs
    };
    assert_ne!(other.digest().unwrap(), digest);
}
