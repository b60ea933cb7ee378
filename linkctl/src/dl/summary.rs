//! `--summary` of `linkctl dl decode` and `linkctl link decode`: what a stream or trace holds, counted
//! per link direction instead of printed item by item, so that a long capture's health reads at a glance.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// The most link directions a summary counts apart (a hostile trace could name millions); the items of
/// any beyond are counted in the total alone.
const MAX_DIRECTIONS: usize = 1 << 16;

/// A link direction as a trace names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Direction {
    trunk: u16,
    from: (u16, u8),
    to: (u16, u8),
}

impl From<(u16, u16, u8, u16, u8)> for Direction {
    /// From the trunk, then the sending node and port, then the receiving ones.
    fn from((trunk, from_node, from_port, to_node, to_port): (u16, u16, u8, u16, u8)) -> Self {
        Direction {
            trunk,
            from: (from_node, from_port),
            to: (to_node, to_port),
        }
    }
}

/// Counts of what the decoder found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    packets: u64,
    /// Packets' flits, header included.
    packet_flits: u64,
    bad_crc: u64,
    cut_short: u64,
    /// Packets cut short when the link left L0 (`link decode`): no damage, the data link replays them.
    left_l0: u64,
    tl_errors: u64,
    replays: u64,
    /// Control flits by type.
    control: BTreeMap<String, u64>,
    ident: u64,
    malformed: u64,
    discarded_units: u64,
    idle_units: u64,
    /// The first and last record's times (traces only).
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    /// Items that do not check (`"ok": false`), which make the exit status 2.
    not_ok: u64,
}

impl Counts {
    /// Count `item`, a decoded item.
    pub(crate) fn add(&mut self, item: &Value) {
        let count = |key: &str| item[key].as_u64().unwrap_or(0);
        if item["left_l0"] == true {
            self.left_l0 += 1;
            return;
        }
        self.not_ok += u64::from(item["ok"] == false);
        match item["kind"].as_str() {
            Some("packet") => {
                self.packets += 1;
                self.packet_flits += count("flits");
                self.bad_crc += u64::from(item["crc_ok"] == false);
                self.cut_short += u64::from(item.get("error").is_some());
                self.tl_errors += u64::from(item.get("tl_error").is_some());
                self.replays += u64::from(item["replay"] == true);
            }
            Some("control") => {
                let kind = item["type"].as_str().unwrap_or("?").to_string();
                *self.control.entry(kind).or_default() += 1;
            }
            Some("ident") => self.ident += 1,
            Some("malformed") => self.malformed += 1,
            Some("discarded") => self.discarded_units += count("units"),
            Some("idle") => self.idle_units += count("units"),
            _ => {}
        }
        if let Some(ns) = item["time_ns"].as_u64() {
            self.first_ns = Some(self.first_ns.map_or(ns, |f| f.min(ns)));
            self.last_ns = Some(self.last_ns.map_or(ns, |l| l.max(ns)));
        }
    }

    /// Whether everything checked, as the exit status has it.
    fn ok(&self) -> bool {
        self.not_ok == 0
    }

    /// The counts as a JSON object's fields.
    pub(crate) fn json(&self) -> Map<String, Value> {
        let mut v = json!({
            "packets": self.packets,
            "packet_flits": self.packet_flits,
            "bad_crc": self.bad_crc,
            "cut_short": self.cut_short,
            "left_l0": self.left_l0,
            "tl_errors": self.tl_errors,
            "replays": self.replays,
            "control": self.control,
            "control_flits": self.control.values().sum::<u64>(),
            "ident": self.ident,
            "malformed": self.malformed,
            "discarded_units": self.discarded_units,
            "idle_units": self.idle_units,
            "ok": self.ok(),
        });
        if let (Some(first), Some(last)) = (self.first_ns, self.last_ns) {
            v["first_ns"] = json!(first);
            v["last_ns"] = json!(last);
        }
        match v {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// The counts in a line of text.
    pub(crate) fn text(&self) -> String {
        let mut s = format!("{} packets ({} flits)", self.packets, self.packet_flits);
        let faults: Vec<String> = [
            (self.bad_crc, "with a bad CRC"),
            (self.cut_short, "cut short"),
            (self.left_l0, "cut short as the link left L0"),
            (self.tl_errors, "refused by the transaction layer"),
            (self.replays, "replayed"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !faults.is_empty() {
            s += &format!(" of which {}", faults.join(", "));
        }
        let control: Vec<String> = self.control.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s += &format!("; {} control flits", self.control.values().sum::<u64>());
        if !control.is_empty() {
            s += &format!(" ({})", control.join(", "));
        }
        s += &format!(
            "; {} identity; {} malformed, {} discarded, {} idle units",
            self.ident, self.malformed, self.discarded_units, self.idle_units
        );
        if let (Some(first), Some(last)) = (self.first_ns, self.last_ns) {
            s += &format!("; {first} to {last} ns");
        }
        s + if self.ok() { "; ok" } else { "; NOT ok" }
    }
}

/// Counts per direction (for a trace) and in all.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    directions: BTreeMap<Direction, Counts>,
    /// Items of directions beyond [`MAX_DIRECTIONS`], counted in the total alone.
    not_itemised: u64,
    total: Counts,
}

impl Summary {
    /// Count `item`, a decoded item of `direction` (none for a stream).
    pub(crate) fn add(&mut self, direction: Option<Direction>, item: &Value) {
        self.total.add(item);
        let Some(direction) = direction else {
            return;
        };
        if self.directions.len() >= MAX_DIRECTIONS && !self.directions.contains_key(&direction) {
            self.not_itemised += 1;
            return;
        }
        self.directions.entry(direction).or_default().add(item);
    }

    /// The summary's items: a `summary` object per direction, then the total (`"direction": "all"`).
    pub(crate) fn items(&self) -> Vec<Value> {
        let mut items = Vec::with_capacity(self.directions.len() + 1);
        for (d, counts) in &self.directions {
            let mut v = Value::Object(counts.json());
            v["kind"] = json!("summary");
            v["trunk"] = json!(d.trunk);
            v["from_node"] = json!(d.from.0);
            v["from_port"] = json!(d.from.1);
            v["to_node"] = json!(d.to.0);
            v["to_port"] = json!(d.to.1);
            items.push(v);
        }
        let mut total = Value::Object(self.total.json());
        total["kind"] = json!("summary");
        total["direction"] = json!("all");
        if self.not_itemised > 0 {
            total["items_of_directions_not_itemised"] = json!(self.not_itemised);
        }
        items.push(total);
        items
    }

    /// The summary as text: a line per direction, then the total.
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        for (d, counts) in &self.directions {
            s += &format!(
                "trunk {} node {} port {} -> node {} port {}: {}\n",
                d.trunk,
                d.from.0,
                d.from.1,
                d.to.0,
                d.to.1,
                counts.text()
            );
        }
        s += &format!("all: {}", self.total.text());
        if self.not_itemised > 0 {
            s += &format!(
                " ({} items of directions beyond the first {MAX_DIRECTIONS} counted here alone)",
                self.not_itemised
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_counted_by_kind_per_direction_and_in_all() {
        let mut summary = Summary::default();
        let a = Some((0, 0, 0, 1, 0).into());
        let b = Some((0, 1, 0, 0, 0).into());
        let items = [
            (
                a,
                json!({"kind": "packet", "flits": 9, "crc_ok": true, "replay": false, "time_ns": 10, "ok": true}),
            ),
            (
                a,
                json!({"kind": "packet", "flits": 9, "crc_ok": false, "time_ns": 20, "ok": false}),
            ),
            (
                a,
                json!({"kind": "packet", "flits": 9, "crc_ok": true, "replay": true, "time_ns": 30, "ok": true}),
            ),
            (
                a,
                json!({"kind": "discarded", "units": 4, "time_ns": 25, "ok": false}),
            ),
            (
                b,
                json!({"kind": "control", "type": "Update", "time_ns": 15, "ok": true}),
            ),
            (
                b,
                json!({"kind": "control", "type": "Nak", "time_ns": 22, "ok": true}),
            ),
            (
                b,
                json!({"kind": "control", "type": "Update", "time_ns": 40, "ok": true}),
            ),
            (b, json!({"kind": "ident", "time_ns": 1, "ok": true})),
        ];
        for (direction, item) in &items {
            summary.add(*direction, item);
        }
        let out = summary.items();
        assert_eq!(out.len(), 3);
        let (a, b, all) = (&out[0], &out[1], &out[2]);
        assert_eq!((a["to_node"].as_u64(), b["to_node"].as_u64()), (Some(1), Some(0)));
        assert_eq!(a["packets"], 3);
        assert_eq!(a["packet_flits"], 27);
        assert_eq!(a["bad_crc"], 1);
        assert_eq!(a["replays"], 1);
        assert_eq!(a["discarded_units"], 4);
        assert_eq!(
            (a["first_ns"].as_u64(), a["last_ns"].as_u64()),
            (Some(10), Some(30))
        );
        assert_eq!(a["ok"], false);
        assert_eq!(b["control"], json!({"Nak": 1, "Update": 2}));
        assert_eq!(b["control_flits"], 3);
        assert_eq!(b["ident"], 1);
        assert_eq!(b["ok"], true);
        assert_eq!(all["direction"], "all");
        assert_eq!(all["packets"], 3);
        assert_eq!(all["control_flits"], 3);
        assert_eq!(
            (all["first_ns"].as_u64(), all["last_ns"].as_u64()),
            (Some(1), Some(40))
        );
        let text = summary.text();
        assert!(
            text.contains("3 packets (27 flits) of which 1 with a bad CRC, 1 replayed"),
            "{text}"
        );
        assert!(text.contains("3 control flits (Nak 1, Update 2)"), "{text}");
        assert!(text.ends_with("1 to 40 ns; NOT ok"), "{text}");
    }

    #[test]
    fn directions_beyond_the_cap_are_counted_in_the_total_alone() {
        let mut summary = Summary::default();
        let item = json!({"kind": "idle", "units": 2});
        for i in 0..MAX_DIRECTIONS + 3 {
            summary.add(Some(((i >> 8) as u16, (i & 0xFF) as u16, 0, 0, 0).into()), &item);
        }
        let out = summary.items();
        assert_eq!(out.len(), MAX_DIRECTIONS + 1);
        let all = out.last().unwrap();
        assert_eq!(all["idle_units"], 2 * (MAX_DIRECTIONS as u64 + 3));
        assert_eq!(all["items_of_directions_not_itemised"], 3);
    }
}
