//! The host's modules import each other in one direction only: the layer
//! table in ARCHITECTURE.md ("Layers") is the rule, and this test reads the
//! host's sources to hold the code to it.
//!
//! Every file under `host/src` is parsed with `syn`; each path that names
//! another top-level module — `crate::x…`, `super::x…` reaching the crate
//! root, a `use` tree, or `crate :: x` inside a macro's tokens — is an edge
//! from the file's top-level module to `x`. Test code counts too. Then:
//! - every top-level module is in the table exactly once, and nothing in
//!   the table is not a module;
//! - no edge points to a higher layer;
//! - the graph has no circle (edges within one layer included).
//!
//! Names the crate root re-exports from other crates (`store`, `config`,
//! `Error`, …) are below every host module and are not edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// `from -> to` with the files that make the edge.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module path of a file: `routing/queue/mod.rs` is `[routing, queue]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The modules `lib.rs` declares.
fn top_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("host/src/lib.rs");
    let file = syn::parse_file(&lib).expect("lib.rs parses");
    file.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

struct Collector<'a> {
    /// The module the code being visited is in (file path + inline mods).
    module: Vec<String>,
    file: String,
    tops: &'a BTreeSet<String>,
    edges: &'a mut Edges,
}

impl Collector<'_> {
    /// Records the edge a path makes, if it leaves its top-level module.
    fn path(&mut self, segments: &[String]) {
        let target = match segments.first().map(String::as_str) {
            Some("crate") => segments.get(1),
            Some("super") => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                if ups >= self.module.len() {
                    segments.get(ups)
                } else {
                    self.module.first()
                }
            }
            _ => None,
        };
        let (Some(to), Some(from)) = (target, self.module.first()) else {
            return;
        };
        if to != from && self.tops.contains(to) && self.tops.contains(from) {
            self.edges
                .entry((from.clone(), to.clone()))
                .or_default()
                .insert(self.file.clone());
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
            syn::UseTree::Name(n) => self.leaf(prefix, n.ident.to_string()),
            syn::UseTree::Rename(r) => self.leaf(prefix, r.ident.to_string()),
            syn::UseTree::Glob(_) => self.path(prefix),
        }
    }

    fn leaf(&mut self, prefix: &[String], last: String) {
        let mut all = prefix.to_vec();
        if last != "self" {
            all.push(last);
        }
        self.path(&all);
    }

    /// `crate :: x` in a macro's tokens, which syn leaves unparsed.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, t) in trees.iter().enumerate() {
            match t {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" => {
                    if let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(x)),
                    ) = (trees.get(i + 1), trees.get(i + 2), trees.get(i + 3))
                        && a.as_char() == ':'
                        && b.as_char() == ':'
                    {
                        self.path(&["crate".to_string(), x.to_string()]);
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(&segments);
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every edge between top-level host modules, with the files making it.
fn edges(tops: &BTreeSet<String>) -> Edges {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut edges = Edges::new();
    for path in files {
        let rel = path.strip_prefix(&root).expect("under src");
        // The binary is a crate of its own over the library.
        if rel == Path::new("main.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable source");
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
        let mut c = Collector {
            module: module_path(rel),
            file: rel.display().to_string(),
            tops,
            edges: &mut edges,
        };
        c.visit_file(&file);
    }
    edges
}

/// The layer table of ARCHITECTURE.md: `| n | module, module |` rows
/// between the `<!-- layers -->` markers, lowest layer first.
fn layers() -> BTreeMap<String, usize> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    let text = std::fs::read_to_string(&doc).expect("ARCHITECTURE.md");
    let table = text
        .split("<!-- layers -->")
        .nth(1)
        .expect("ARCHITECTURE.md has a <!-- layers --> table");
    let mut out = BTreeMap::new();
    for row in table.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let Ok(layer) = cells[0].parse::<usize>() else {
            continue; // the header and its rule
        };
        for m in cells[1].split(',').map(|m| m.trim().trim_matches('`')) {
            assert!(
                out.insert(m.to_string(), layer).is_none(),
                "{m} is in the layer table twice"
            );
        }
    }
    out
}

/// Circles in the graph (Tarjan's strongly connected components of more
/// than one module).
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    struct T<'a> {
        adj: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        for &w in &t.adj[v] {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                t.low.entry(v).and_modify(|l| *l = (*l).min(lw));
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                t.low.entry(v).and_modify(|l| *l = (*l).min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        adj: &adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in adj.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn host_modules_import_downward_only_and_in_no_circle() {
    let tops = top_modules();
    let edges = edges(&tops);
    // `cargo test --test layers -- --nocapture` prints the graph.
    for ((a, b), files) in &edges {
        eprintln!("{a} -> {b}  {files:?}");
    }
    let layers = layers();

    let listed: BTreeSet<String> = layers.keys().cloned().collect();
    assert_eq!(
        listed, tops,
        "ARCHITECTURE.md's layer table must list exactly the modules lib.rs declares"
    );

    let upward: Vec<String> = edges
        .iter()
        .filter(|((a, b), _)| layers[b] > layers[a])
        .map(|((a, b), files)| {
            format!(
                "{a} (layer {}) -> {b} (layer {}) in {files:?}",
                layers[a], layers[b]
            )
        })
        .collect();
    assert!(
        upward.is_empty(),
        "imports that point up the layers:\n{}",
        upward.join("\n")
    );

    let found = circles(&edges);
    assert!(found.is_empty(), "import circles: {found:?}");
}

#[test]
fn the_check_sees_the_imports_it_must() {
    // The collector itself: a path, a use tree, super from a top-level
    // file and a macro's tokens each make an edge; a doc comment and a
    // string do not.
    let tops: BTreeSet<String> = ["a", "b", "c", "d", "e", "f", "g"]
        .iter()
        .map(ToString::to_string)
        .collect();
    let mut edges = Edges::new();
    let file = syn::parse_file(
        r#"
        //! See [`crate::g`].
        use crate::{b::X, c};
        fn g() { let _ = super::d::y(); tracing::info!("{}", crate::e::Z); let _ = "crate::g"; }
        mod tests { use super::super::f; }
        "#,
    )
    .unwrap();
    Collector {
        module: vec!["a".into()],
        file: "a.rs".into(),
        tops: &tops,
        edges: &mut edges,
    }
    .visit_file(&file);
    let got: Vec<String> = edges.keys().map(|(a, b)| format!("{a}->{b}")).collect();
    assert_eq!(got, ["a->b", "a->c", "a->d", "a->e", "a->f"]);
    edges.insert(("b".into(), "a".into()), BTreeSet::new());
    assert_eq!(
        circles(&edges),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}

/// A file a newcomer can read in one sitting: no Rust file in the
/// repository is over 700 lines, its inline tests counted (they move to a
/// sibling `tests.rs` when they are the cause).
#[test]
fn no_source_file_is_over_seven_hundred_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&root).expect("readable checkout") {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() && !name.starts_with('.') && !["target", "tools", "data"].contains(&name) {
            rust_files(&path, &mut files);
        }
    }
    assert!(
        files.len() > 100,
        "the walk found the sources ({})",
        files.len()
    );
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > 700).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over 700 lines: {long:#?}");
}
