//! readahead's figures and table.

use evlab_wire::micro::readahead::{Cache, Point, Report, Status, Way};

use crate::analysis::micro::readahead::size_words;
use crate::model::text::num;
use crate::render::plot::{Plot, Xy};
use crate::render::table::{render_findings, Table};

/// Mean of `f` over the rounds of each (way, size) at `cache`, as one line per way.
fn lines(r: &Report, cache: Cache, f: fn(&Point) -> f64) -> Vec<(Way, Vec<Xy>)> {
    let mut sizes: Vec<u64> = r.points.iter().map(|p| p.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    Way::ALL
        .into_iter()
        .map(|way| {
            let xy = sizes
                .iter()
                .filter_map(|&size| {
                    let v: Vec<f64> = r
                        .points
                        .iter()
                        .filter(|p| p.way == way && p.cache == cache && p.size == size)
                        .filter(|p| p.status == Status::Ok)
                        .map(f)
                        .collect();
                    (!v.is_empty()).then(|| {
                        Xy::new(size as f64 / 1024.0, v.iter().sum::<f64>() / v.len() as f64)
                    })
                })
                .collect();
            (way, xy)
        })
        .collect()
}

/// A figure's tag, title, y label and quantity.
type Metric = (&'static str, &'static str, &'static str, fn(&Point) -> f64);

/// Per cache state: time to the last byte, and the sender's CPU per MiB, against the file's
/// size (both axes logarithmic), one line per way (means over the rounds).
pub fn plots(r: &Report) -> Vec<Plot> {
    let mut out = Vec::new();
    for cache in [Cache::Cold, Cache::Warm] {
        if !r
            .points
            .iter()
            .any(|p| p.cache == cache && p.status == Status::Ok)
        {
            continue;
        }
        let metrics: [Metric; 2] = [
            ("time", "time to the last byte", "seconds", |p| p.seconds),
            ("cpu", "the sender's CPU per MiB", "CPU µs per MiB", |p| {
                p.cpu_us_per_mib
            }),
        ];
        for (tag, what, y, f) in metrics {
            let mut p = Plot::new(
                &format!("readahead-{tag}-{}", cache.name()),
                format!("{what}, {} files, over a loopback socket", cache.name()),
                "file size (KiB)",
                y,
            )
            .log_x()
            .log_y();
            for (way, xy) in lines(r, cache, f) {
                p.line(way.name(), xy);
            }
            out.push(p);
        }
    }
    out
}

/// The points as a table (means over the rounds), the skipped ones with their reason.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "readahead: {} round(s), files in {} ({})\n{}\n\n",
        r.repeat,
        r.dir,
        r.filesystem,
        r.machine.line()
    );
    let mut t = Table::new([
        "cache",
        "size",
        "way",
        "rounds",
        "seconds (mean)",
        "MiB/s",
        "CPU us/MiB",
        "resident before",
    ]);
    let mut notes = Vec::new();
    let mut keys: Vec<(Cache, u64, Way)> =
        r.points.iter().map(|p| (p.cache, p.size, p.way)).collect();
    keys.sort_by_key(|(c, s, w)| (*c != Cache::Cold, *s, Way::ALL.iter().position(|x| x == w)));
    keys.dedup();
    for (cache, size, way) in keys {
        let at: Vec<&Point> = r
            .points
            .iter()
            .filter(|p| p.cache == cache && p.size == size && p.way == way)
            .collect();
        let ok: Vec<&&Point> = at.iter().filter(|p| p.status == Status::Ok).collect();
        if ok.is_empty() {
            if let Some(why) = at.iter().find_map(|p| p.reason.as_ref()) {
                notes.push(format!(
                    "  {} {} {}: {why}",
                    cache.name(),
                    size_words(size),
                    way.name()
                ));
            }
            continue;
        }
        let mean = |f: fn(&Point) -> f64| ok.iter().map(|p| f(p)).sum::<f64>() / ok.len() as f64;
        let secs = mean(|p| p.seconds);
        t.row([
            cache.name().to_string(),
            size_words(size),
            way.name().to_string(),
            ok.len().to_string(),
            num(secs, 4),
            num(size as f64 / (1 << 20) as f64 / secs.max(1e-12), 0),
            num(mean(|p| p.cpu_us_per_mib), 0),
            format!("{:.0}%", mean(|p| p.resident_before) * 100.0),
        ]);
    }
    out.push_str(&t.render());
    if !notes.is_empty() {
        out.push_str("\nnot measured:\n");
        for n in notes {
            out.push_str(&n);
            out.push('\n');
        }
    }
    out.push_str(&render_findings(&r.findings));
    out
}
