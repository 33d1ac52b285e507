use super::*;

/// A run of one series, epoll-et, with no idle connections: one valid point per rate of
/// `rates`, in trial 0, indices from 0.
fn summary(rates: &[f64]) -> Summary {
    let text = "name = \"t\"\nmechanisms = [\"epoll-et\"]\nrates = [100, 200]\nidle = [0]\n";
    let spec = Spec::parse(text, "t.toml").unwrap();
    let series = spec.series_list(&|_| true, &[]);
    let points = rates
        .iter()
        .enumerate()
        .map(|(i, &r)| PointResult::new(i, &series[0], 0, r, 0, 2.0))
        .collect();
    Summary {
        format: results::FORMAT,
        experiment: spec,
        spec_path: "t.toml".into(),
        spec_text: text.into(),
        command: "evlab run t.toml".into(),
        duration_override: None,
        started: "2026-01-01T00:00:00Z".into(),
        finished: None,
        wall_s: 0.0,
        interrupted: false,
        machine: Default::default(),
        series,
        skipped: vec![],
        calibration: None,
        quiet: None,
        points,
        knees: vec![],
        resumed: vec![],
        hosts: vec![],
        network: vec![],
        sequential: None,
    }
}

/// Each trial visits every arm once, in an order drawn from the seed: the same seed gives
/// the same order, and over seeds the idle arm runs first about as often as second.
#[test]
fn each_trial_visits_its_arms_in_an_order_drawn_from_the_seed() {
    let src = "name = \"t\"\nmechanisms = [\"select\", \"poll\", \"epoll-lt\"]\n\
               rates = [1000]\nidle = [0, 10000]\ntrials = 3\n";
    let mut s = Spec::parse(src, "t.toml").unwrap();
    let series = s.series_list(&|_| true, &[]);
    let order = |s: &Spec| -> Vec<(u32, usize, String)> {
        sweep_order(s, &series)
            .iter()
            .map(|l| (l.0, l.1, l.2.label.clone()))
            .collect()
    };
    s.order_seed = Some(7);
    let a = order(&s);
    assert_eq!(a, order(&s), "the same seed, the same order");
    for t in 1..=3 {
        let mut arms: Vec<(usize, String)> = a
            .iter()
            .filter(|l| l.0 == t)
            .map(|l| (l.1, l.2.clone()))
            .collect();
        assert_eq!(arms.len(), 6);
        arms.sort();
        arms.dedup();
        assert_eq!(arms.len(), 6, "trial {t} visits every arm once");
    }
    let mut idle_first = 0;
    let mut orders = std::collections::BTreeSet::new();
    for seed in 0..200 {
        s.order_seed = Some(seed);
        let o = order(&s);
        let pos = |idle: usize| {
            o.iter()
                .position(|l| l.0 == 1 && l.1 == idle && l.2 == "select")
                .unwrap()
        };
        idle_first += usize::from(pos(10000) < pos(0));
        orders.insert(o);
    }
    assert!(orders.len() > 150, "{} orders of 200 seeds", orders.len());
    assert!(
        (70..=130).contains(&idle_first),
        "idle arm first in {idle_first} of 200"
    );
}

/// A block added by a look runs its trials as a longer fixed design would have.
#[test]
fn a_later_block_runs_its_trials_in_the_fixed_designs_order() {
    let src = "name = \"t\"\nmechanisms = [\"select\", \"poll\"]\nrates = [1000]\n\
               idle = [0, 10000]\norder_seed = 3\n[sequential]\nmost = 6\n";
    let mut s = Spec::parse(src, "t.toml").unwrap();
    let series = s.series_list(&|_| true, &[]);
    let key = |l: &SweepLeg| (l.0, l.1, l.2.label.clone());
    let first: Vec<_> = sweep_order(&s, &series).iter().map(key).collect();
    assert_eq!(first.len(), 3 * 4, "the first block: 3 trials");
    let later: Vec<_> = sweep_order_of(&s, &series, 4..=5).iter().map(key).collect();
    s.sequential = None;
    s.trials = 5;
    let fixed: Vec<_> = sweep_order(&s, &series).iter().map(key).collect();
    assert_eq!(fixed[..12], first[..]);
    assert_eq!(fixed[12..], later[..]);
}

/// After a block, the look is recorded and says what comes next: with no finding to judge
/// every finding is decided, so an interim look stops; a block is added while one is not,
/// and none past `most`.
#[test]
fn a_look_after_a_block_is_recorded_and_gives_the_next_trials() {
    use evlab_reason::model::sequential::{Record, Rule, SequentialSpec};
    let mut s = summary(&[100.0, 200.0]);
    let rule = |most| {
        Rule::of(&SequentialSpec {
            first: 3,
            block: 2,
            most,
            budget_s: Some(1e6),
        })
    };
    s.sequential = Some(Record::new(rule(6)));
    let clock = looks::Clock::new(Instant::now(), &s);
    let quiet = Progress::new(true);
    assert_eq!(looks::after_block(&mut s, &clock, &quiet), None);
    let q = s.sequential.as_ref().unwrap();
    assert_eq!(q.looks.len(), 1);
    assert_eq!(q.looks[0].stopped.as_deref(), Some("all decided"));
    assert_eq!((q.looks[0].judged, q.trials), (0, 3));
    // The most trials already run: a final look.
    s.sequential = Some(Record::new(rule(3)));
    assert_eq!(looks::after_block(&mut s, &clock, &quiet), None);
    let l = &s.sequential.as_ref().unwrap().looks[0];
    assert_eq!(l.stopped.as_deref(), Some("most trials"));
    assert_eq!(l.level, 0.9);
    // A run of fixed trials makes no look.
    s.sequential = None;
    assert_eq!(looks::after_block(&mut s, &clock, &quiet), None);
}

#[test]
fn a_series_runs_its_legs_at_its_own_swept_values_only() {
    let src = "name = \"t\"\nmechanisms = [\"select\"]\nrates = [1000, 2000]\n\
               idle = [0, 100]\nduration_s = 1\n\
               [sweep]\nflag = \"--workers\"\nvalues = [1, 64, 512]\n\
               [[series]]\nlabel = \"t\"\nmechanism = \"epoll-lt\"\nsweep_values = [1, 64]\n";
    let s = Spec::parse(src, "t.toml").unwrap();
    let series = s.series_list(&|_| true, &[]);
    let legs = sweep_order(&s, &series);
    let at = |label: &str| -> Vec<f64> {
        let mut v: Vec<f64> = legs
            .iter()
            .filter(|l| l.2.label == label)
            .filter_map(|l| l.3)
            .collect();
        v.dedup();
        v
    };
    assert_eq!(at("t"), [1.0, 64.0], "every arm at a value before the next");
    assert_eq!(at("select"), [1.0, 64.0, 512.0]);
    let e = estimate::estimate(&s, series.len(), 1.0);
    let rates = s.rates.fixed().len();
    assert_eq!(e.points.to_string(), (legs.len() * rates).to_string());
}

#[test]
fn a_resumed_grid_keeps_each_valid_point_once_and_replaces_the_invalid() {
    // One series offered 100/s twice, 200/s once (trial 0, indices from 0): indices 0 and
    // 2 at 100/s (2 flagged), index 1 at 200/s failed.
    let mut s = summary(&[100.0, 200.0, 100.0]);
    assert_eq!(s.points.len(), 3);
    s.points[1].status = Status::Failed;
    s.points[2].flags.push("client saturated".into());
    let mut used = std::collections::BTreeSet::new();
    let key = |rate| ("epoll-et", 0, 0, None, rate);
    let first = take_kept(&s, &mut used, key(100.0)).expect("the valid 100/s point is kept");
    assert_eq!(first.index, s.points[0].index);
    // The grid's second 100/s: the other 100/s point is flagged, so it is measured again.
    assert!(take_kept(&s, &mut used, key(100.0)).is_none());
    assert!(take_kept(&s, &mut used, key(200.0)).is_none());
    let out = std::env::temp_dir().join(format!("evlab-resume-unit-{}", std::process::id()));
    let mut again = s.points[2].clone();
    again.index = 3;
    again.flags.clear();
    used.insert(3);
    replace_point(&mut s, &out, again, &used);
    let indices: Vec<usize> = s.points.iter().map(|p| p.index).collect();
    assert_eq!(
        indices,
        vec![0, 1, 3],
        "the flagged 100/s point was replaced, once"
    );
    let mut at_200 = s.points[1].clone();
    at_200.index = 4;
    at_200.status = Status::Ok;
    used.insert(4);
    replace_point(&mut s, &out, at_200, &used);
    let indices: Vec<usize> = s.points.iter().map(|p| p.index).collect();
    assert_eq!(indices, vec![0, 3, 4]);
    assert!(s.points.iter().all(|p| p.valid()));
}
