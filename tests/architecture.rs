//! The house rules of the source tree, checked from the source (issue 17, ARCHITECTURE.md):
//! which layer may import which, and no import circle between files.
//!
//! Layers, bottom up: `error`; `base` (instants, tenancy, key records); `store` (SQL); `domain`
//! (rules); `config`; `app` (state and commit machinery); `http` (transport), `api` (handlers),
//! and the workers `webhooks`, `sandbox`, `ledger_monitor` (balance monitor crossings) and `bank` (bank files and their transport). `lib.rs` joins them and `main.rs` is the CLI; both
//! may import anything. A file's imports are read from its `crate::` and `super::` paths (one
//! level of `{...}` groups expanded); its `#[cfg(test)] mod tests` is left out, since tests may
//! reach across layers to build fixtures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What each top-level module may import, besides itself.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("base", &["error"]),
    ("store", &["base", "error"]),
    ("domain", &["base", "error", "store"]),
    ("config", &["base", "domain", "error"]),
    ("app", &["base", "config", "domain", "error", "store"]),
    ("http", &["app", "base", "config", "domain", "error", "store"]),
    ("api", &["app", "base", "config", "domain", "error", "http", "store"]),
    ("webhooks", &["app", "base", "config", "domain", "error", "store"]),
    ("sandbox", &["app", "bank", "base", "config", "domain", "error", "store"]),
    ("ledger_monitor", &["app", "base", "config", "domain", "error", "store"]),
    ("bank", &["app", "base", "config", "domain", "error", "store"]),
];

type Module = Vec<String>;

/// Every module file of the library (`lib.rs` is the root, `[]`), with its source.
fn modules() -> BTreeMap<Module, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap().with_extension("");
            let mut module: Module = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            match module.as_slice() {
                [only] if only == "main" => continue,
                [only] if only == "lib" => module.clear(),
                [.., last] if last == "mod" => {
                    module.pop();
                }
                _ => {}
            }
            if path.extension().is_some_and(|e| e == "rs") {
                out.insert(module, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    out
}

/// The source without its unit tests and comments.
fn code_of(source: &str) -> String {
    let source = source.split("#[cfg(test)]\nmod tests").next().unwrap();
    source.lines().map(|line| line.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// The module paths a file names: `crate::a::b` and `super::a`, with `{x, y::z}` groups opened.
fn named_paths(module: &Module, code: &str) -> Vec<Module> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"].iter().flat_map(|p| code.match_indices(p).map(|(i, _)| i)) {
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let rest = &code[start..];
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
        let prefix = rest[..end].trim_end_matches(':');
        let group = rest[end..].strip_prefix('{').and_then(|g| g.split_once('}')).map(|(inside, _)| inside);
        let heads: Vec<String> = match group {
            Some(inside) => inside.split(',').map(|item| format!("{prefix}::{}", item.trim())).collect(),
            None => vec![prefix.to_owned()],
        };
        for head in heads {
            paths.push(resolve(module, &head));
        }
    }
    paths
}

fn resolve(module: &Module, path: &str) -> Module {
    let mut segments = path.split("::").filter(|s| !s.is_empty() && *s != "self");
    let mut out: Module = match segments.next() {
        Some("crate") => Vec::new(),
        _ => module[..module.len().saturating_sub(1)].to_vec(),
    };
    for segment in segments {
        let segment = segment.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("");
        if segment == "super" {
            out.pop();
        } else if !segment.is_empty() {
            out.push(segment.to_owned());
        }
    }
    out
}

/// Each file's imports, as the module files they land in (the longest known prefix).
fn import_graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules();
    let mut graph = BTreeMap::new();
    for (module, source) in &modules {
        let mut targets = BTreeSet::new();
        for path in named_paths(module, &code_of(source)) {
            let target = (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains_key(p)).unwrap_or_default();
            if &target != module {
                targets.insert(target);
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

#[test]
fn layers_import_only_what_is_below_them() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    for (module, targets) in import_graph() {
        let Some(top) = module.first() else { continue };
        let may = allowed.get(top.as_str()).unwrap_or_else(|| panic!("src/{top} is not in ALLOWED: place it in a layer"));
        for target in targets.iter().filter_map(|t| t.first()) {
            if target != top && !may.contains(&target.as_str()) {
                wrong.push(format!("{} imports {target}", module.join("::")));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering:\n{}", wrong.join("\n"));
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let graph = import_graph();
    // A module and the files inside it are one unit (a `mod.rs` and its children share types
    // both ways); between any other two files, an import circle is a design error.
    let within = |a: &Module, b: &Module| a.starts_with(b) || b.starts_with(a);
    let mut circles = BTreeSet::new();
    for start in graph.keys() {
        // Depth-first search back to `start`, over edges between unrelated files.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, trail)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten().filter(|n| !within(&at, n)) {
                if next == start && trail.len() > 1 {
                    let mut names: Vec<String> = trail.iter().map(|m| m.join("::")).collect();
                    names.sort();
                    circles.insert(names.join(" -> "));
                } else if seen.insert(next.clone()) {
                    let mut longer = trail.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    assert!(circles.is_empty(), "import circles:\n{}", circles.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn the_checker_sees_imports() {
    // The rules above pass vacuously if the parser finds nothing: pin a few known edges.
    let graph = import_graph();
    let module = |path: &str| path.split("::").map(str::to_owned).collect::<Module>();
    assert!(graph[&module("store")].contains(&module("base::api_key")), "store/mod.rs names base::api_key");
    assert!(graph[&module("http::idempotency")].contains(&module("app")), "the idempotency layer uses app::AppState");
    assert!(
        graph[&module("domain::payment_order::ops")].contains(&module("domain::validate")),
        "{:?}",
        graph[&module("domain::payment_order::ops")]
    );
}
