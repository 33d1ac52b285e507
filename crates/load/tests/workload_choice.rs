//! The workload `evlab load`'s flags choose: its label in the report, and the factory that
//! reads its files once and gives each thread a copy.

use std::time::Duration;

use evlab_load::workload::polymix::PolymixConfig;
use evlab_load::workload::specweb::SpecWebConfig;
use evlab_load::workload::{Choice, Method, WorkloadError};

#[test]
fn labels_name_the_workload_as_the_report_has_always_said() {
    let polymix = PolymixConfig {
        hit_ratio: 0.5,
        cacheable: 0.75,
        zipf: 1.0,
        calls_max: 64,
        ..PolymixConfig::default()
    };
    let cases = [
        (
            Choice::Fixed {
                uri: "/one".into(),
                calls: 3,
                method: Method::Head,
            },
            "/one x 3",
        ),
        (
            Choice::UriList {
                path: "/l.txt".into(),
                calls: 1,
                method: Method::Get,
            },
            "uri-list:/l.txt",
        ),
        (
            Choice::SessLog {
                spec: "10,0.5,s.txt".into(),
                file: "s.txt".into(),
                think: Duration::from_millis(500),
                method: Method::Get,
            },
            "wsesslog:10,0.5,s.txt",
        ),
        (
            Choice::Polymix {
                dir: "/pm".into(),
                config: polymix,
                seed: 1,
            },
            "polymix:/pm:hits=0.5,cacheable=0.75,zipf=1,calls=64",
        ),
        (
            Choice::SpecWeb {
                dir: "/sw".into(),
                config: SpecWebConfig::default(),
                seed: 1,
            },
            "specweb:/sw",
        ),
    ];
    for (choice, want) in cases {
        assert_eq!(choice.label(), want);
    }
}

#[test]
fn each_thread_gets_a_copy_of_the_workload_read_once() {
    let list = std::env::temp_dir().join(format!("evlab-choice-{}-list", std::process::id()));
    std::fs::write(&list, "/a\n/b\n").unwrap();
    let choice = Choice::UriList {
        path: list.clone(),
        calls: 2,
        method: Method::Head,
    };
    let factory = choice.factory();
    // Read once: the file may go, the copies stay.
    std::fs::remove_file(&list).unwrap();
    let factory = factory.unwrap();
    for tid in 0..2 {
        let mut w = factory(tid);
        let mut out = Vec::new();
        w.next_session(&mut out);
        let got: Vec<_> = out.iter().map(|c| (c.uri.to_string(), c.method)).collect();
        assert_eq!(
            got,
            [("/a".into(), Method::Head), ("/b".into(), Method::Head)],
            "thread {tid}"
        );
    }
    let fixed = Choice::Fixed {
        uri: "/one".into(),
        calls: 0,
        method: Method::Get,
    };
    let mut out = Vec::new();
    fixed.factory().unwrap()(0).next_session(&mut out);
    assert_eq!(out.len(), 1, "at least one call per session");
}

#[test]
fn a_missing_file_is_named() {
    let gone = std::env::temp_dir().join(format!("evlab-choice-{}-gone", std::process::id()));
    let choices = [
        Choice::UriList {
            path: gone.clone(),
            calls: 1,
            method: Method::Get,
        },
        Choice::SessLog {
            spec: format!("1,0,{}", gone.display()),
            file: gone.clone(),
            think: Duration::ZERO,
            method: Method::Get,
        },
    ];
    for choice in choices {
        let Err(e) = choice.factory() else {
            panic!("{choice:?} was made from a missing file");
        };
        assert!(matches!(e, WorkloadError::Io { .. }), "{e}");
        assert!(e.to_string().contains(&gone.display().to_string()), "{e}");
    }
}
