//! A training set as the line-code tools print it, in text and JSON.

use link_phy::ordered_set::{TrainingSet, TsKind};
use link_phy::rate::Rate;
use serde_json::{json, Value};

pub fn name(ts: &TrainingSet) -> &'static str {
    match ts.kind {
        TsKind::Ts1 => "TS1",
        TsKind::Ts2 => "TS2",
    }
}

/// `TS1 link PAD lane 3 N_FTS 32 rates 2.5/5/8 GT/s`, then any requests and control bits.
pub fn text(ts: &TrainingSet) -> String {
    let rates: Vec<String> = rates(ts).iter().map(f64::to_string).collect();
    let flags: String = flags(ts).iter().map(|f| format!(" {f}")).collect();
    format!(
        "{} link {} lane {} N_FTS {} rates {} GT/s{flags}",
        name(ts),
        number(ts.link),
        number(ts.lane),
        ts.n_fts,
        rates.join("/")
    )
}

/// `name`, `link` and `lane` (null for PAD), `n_fts`, `rates_gts` and `flags`.
pub fn json(ts: &TrainingSet) -> Value {
    json!({
        "name": name(ts),
        "link": ts.link,
        "lane": ts.lane,
        "n_fts": ts.n_fts,
        "rates_gts": rates(ts),
        "flags": flags(ts),
    })
}

/// A link or lane number, PAD for none.
fn number(n: Option<u8>) -> String {
    n.map_or("PAD".to_owned(), |n| n.to_string())
}

/// The rates a training set advertises, in GT/s.
fn rates(ts: &TrainingSet) -> Vec<f64> {
    Rate::ALL
        .iter()
        .filter(|r| ts.rates.contains(r.advertised_bit()))
        .map(|r| r.gts())
        .collect()
}

/// The requests of a training set's rate identifier (a speed change) and its training control bits.
fn flags(ts: &TrainingSet) -> Vec<&'static str> {
    let requests = ts.rates.difference(Rate::Gen5.advertise_up_to());
    let names = requests.iter_names().map(|(name, _)| name);
    names
        .chain(ts.control.iter_names().map(|(name, _)| name))
        .collect()
}
