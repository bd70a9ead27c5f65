//! The registry's rules (DESIGN.md §3 "Registry"): unique final names, built-ins never
//! overridden by external tools, explicit shadowing only, valid names and schemas.

use crate::common;

use common::*;
use serde_json::json;
use std::sync::Arc;
use tooljournal_runtime::event::ToolSource;
use tooljournal_runtime::{Registry, RegistryError, RESERVED_NAMES};

fn ext(server: &str) -> ToolSource {
    ToolSource::External {
        server: server.into(),
    }
}

fn tool(name: &str) -> Arc<TestTool> {
    Arc::new(TestTool::ok(name))
}

fn hash_of(registry: &Registry, name: &str) -> String {
    registry
        .descriptors()
        .into_iter()
        .find(|d| d.name == name)
        .expect("registered")
        .schema_hash
}

#[test]
fn duplicate_registration_is_refused() {
    let mut r = Registry::new();
    r.register(tool("read"), ToolSource::BuiltIn).unwrap();
    let dup = RegistryError::Duplicate {
        name: "read".into(),
    };
    assert_eq!(
        r.register(tool("read"), ToolSource::BuiltIn),
        Err(dup.clone())
    );
    assert_eq!(
        r.register_shadowing(tool("read"), ToolSource::BuiltIn),
        Err(dup)
    );

    r.register(tool("fetch"), ext("a")).unwrap();
    let dup = RegistryError::Duplicate {
        name: "fetch".into(),
    };
    assert_eq!(r.register(tool("fetch"), ext("b")), Err(dup.clone()));
    assert_eq!(r.register(tool("fetch"), ToolSource::BuiltIn), Err(dup));

    let names: Vec<String> = r.descriptors().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["fetch", "read"], "each name once");
    assert_eq!(
        r.lookup("fetch").unwrap().source,
        ext("a"),
        "the first registration stands"
    );
}

#[test]
fn external_tool_cannot_take_a_builtin_name() {
    let refused = RegistryError::ExternalOverridesBuiltIn {
        name: "read".into(),
        server: "evil".into(),
    };
    let mut parent = Registry::new();
    parent.register(tool("read"), ToolSource::BuiltIn).unwrap();
    assert_eq!(
        parent.register(tool("read"), ext("evil")),
        Err(refused.clone())
    );
    assert_eq!(
        parent.register_shadowing(tool("read"), ext("evil")),
        Err(refused.clone())
    );

    let parent = Arc::new(parent);
    let mut child = Registry::child(parent.clone());
    assert_eq!(
        child.register(tool("read"), ext("evil")),
        Err(refused.clone())
    );
    assert_eq!(
        child.register_shadowing(tool("read"), ext("evil")),
        Err(refused.clone())
    );

    let mut grandchild = Registry::child(Arc::new(child));
    assert_eq!(
        grandchild.register_shadowing(tool("read"), ext("evil")),
        Err(refused)
    );
    let seen = grandchild.lookup("read").expect("still visible");
    assert_eq!(seen.source, ToolSource::BuiltIn);
    assert!(
        Arc::ptr_eq(&seen, &parent.lookup("read").unwrap()),
        "still the parent's built-in"
    );
}

#[test]
fn child_scope_shadows_a_parent_tool_only_explicitly() {
    let mut parent = Registry::new();
    parent.register(tool("grep"), ToolSource::BuiltIn).unwrap();
    parent.register(tool("fetch"), ext("web")).unwrap();
    let parent = Arc::new(parent);
    let mut child = Registry::child(parent.clone());

    assert_eq!(
        child.register(tool("grep"), ToolSource::BuiltIn),
        Err(RegistryError::ShadowsParent {
            name: "grep".into()
        })
    );
    assert_eq!(
        child.register(tool("fetch"), ext("web2")),
        Err(RegistryError::ShadowsParent {
            name: "fetch".into()
        })
    );
    assert!(Arc::ptr_eq(
        &child.lookup("grep").unwrap(),
        &parent.lookup("grep").unwrap()
    ));

    child
        .register_shadowing(tool("grep"), ToolSource::BuiltIn)
        .unwrap();
    child
        .register_shadowing(tool("fetch"), ext("web2"))
        .unwrap();
    assert!(!Arc::ptr_eq(
        &child.lookup("grep").unwrap(),
        &parent.lookup("grep").unwrap()
    ));
    assert_eq!(child.lookup("fetch").unwrap().source, ext("web2"));
    assert_eq!(
        parent.lookup("fetch").unwrap().source,
        ext("web"),
        "the parent is unchanged"
    );

    let seen: Vec<(String, ToolSource)> = child
        .descriptors()
        .into_iter()
        .map(|d| (d.name, d.source))
        .collect();
    assert_eq!(
        seen,
        [
            ("fetch".to_owned(), ext("web2")),
            ("grep".to_owned(), ToolSource::BuiltIn)
        ],
        "a shadowed tool is listed once, as the child's"
    );
}

#[test]
fn reserved_and_malformed_names_are_refused() {
    let mut r = Registry::new();
    for name in RESERVED_NAMES {
        for source in [ToolSource::BuiltIn, ext("x")] {
            assert_eq!(
                r.register(tool(name), source),
                Err(RegistryError::Reserved { name: name.into() })
            );
        }
    }
    let long = "a".repeat(65);
    for name in [
        "",
        "a b",
        "a.b",
        "a/b",
        "née",
        "tab\t",
        "x:y",
        long.as_str(),
    ] {
        assert_eq!(
            r.register(tool(name), ToolSource::BuiltIn),
            Err(RegistryError::BadName { name: name.into() }),
            "{name:?}"
        );
    }
    assert!(r.descriptors().is_empty(), "nothing was registered");
    let longest = "a".repeat(64);
    for name in [longest.as_str(), "A-z_09", "x"] {
        r.register(tool(name), ToolSource::BuiltIn).unwrap();
    }
    assert_eq!(r.descriptors().len(), 3);
}

#[test]
fn invalid_schema_is_refused_at_registration() {
    let mut r = Registry::new();
    let bad_input = Arc::new(TestTool::ok("a").input(json!({"type": 12})));
    let err = r.register(bad_input, ToolSource::BuiltIn).unwrap_err();
    assert!(
        matches!(&err, RegistryError::BadSchema { name, which: "input", .. } if name == "a"),
        "{err:?}"
    );
    let bad_output = Arc::new(TestTool::ok("b").output(json!({"type": "object", "required": "n"})));
    let err = r.register(bad_output, ToolSource::BuiltIn).unwrap_err();
    assert!(
        matches!(&err, RegistryError::BadSchema { name, which: "output", .. } if name == "b"),
        "{err:?}"
    );
    assert!(r.lookup("a").is_none() && r.lookup("b").is_none());
    assert!(r.descriptors().is_empty());
}

#[test]
fn schema_hash_changes_with_the_schema() {
    let base = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let variants = [
        TestTool::ok("t").input(base.clone()),
        TestTool::ok("t")
            .input(json!({"type": "object", "properties": {"path": {"type": "integer"}}})),
        TestTool::ok("t")
            .input(base.clone())
            .output(json!({"type": "object"})),
        TestTool::ok("t")
            .input(base.clone())
            .output(json!({"type": "array"})),
    ];
    let hashes: Vec<String> = variants
        .into_iter()
        .map(|t| {
            let mut r = Registry::new();
            r.register(Arc::new(t), ToolSource::BuiltIn).unwrap();
            hash_of(&r, "t")
        })
        .collect();
    for i in 0..hashes.len() {
        for j in i + 1..hashes.len() {
            assert_ne!(hashes[i], hashes[j], "variants {i} and {j}");
        }
    }
    let mut r = Registry::new();
    r.register(Arc::new(TestTool::ok("u").input(base)), ToolSource::BuiltIn)
        .unwrap();
    assert_eq!(
        hash_of(&r, "u"),
        hashes[0],
        "same schemas, same hash, whatever the name"
    );
}
