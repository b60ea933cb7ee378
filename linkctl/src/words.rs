//! Counts in words, for the commands' text reports.

/// `n` `thing`s, in words: "1 line", "64 lines".
pub fn plural(n: u64, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        n => format!("{n} {thing}s"),
    }
}
