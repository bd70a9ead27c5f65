//! `testing::TempPostgres::start_durable`: the server a benchmark of durable commits runs on
//! syncs its commits, while the tests' shared server keeps `fsync=off`.

use tooljournal_pg::testing::{shared, TempPostgres};

#[test]
fn a_durable_server_syncs_its_commits_and_the_tests_server_does_not() {
    let durable = TempPostgres::start_durable(None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(durable.show("fsync").expect("SHOW fsync"), "on");
    assert_eq!(
        durable
            .show("synchronous_commit")
            .expect("SHOW synchronous_commit"),
        "on"
    );
    let connections: u32 = durable
        .show("max_connections")
        .expect("SHOW max_connections")
        .parse()
        .expect("a number");
    assert!(connections >= 200, "max_connections {connections}");
    assert_eq!(shared().show("fsync").expect("SHOW fsync"), "off");
}
