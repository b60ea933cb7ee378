//! `linkctl`: the user-facing tool of the link stack.
//!
//! Every capability of the stack is reachable from here and scriptable: commands read stdin and write
//! stdout, take `--json` where a machine reads the result, and exit non-zero with a one-line message on
//! bad input.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// `println!` for every command: standard output that refuses a line (a full disk, `> /dev/full`) fails the
/// run with linkctl's one-line error and exit status 1 (`main`), where std's `println!` panics, and
/// nothing more is written to it. (A reader that goes away ends linkctl by SIGPIPE, below.)
macro_rules! println {
    () => {
        $crate::print_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::print_line(format_args!($($arg)*))
    };
}

/// `eprint!` for every command: standard error that refuses a write (`2>/dev/full`) makes the run's exit
/// status 1 (`main`), where std's `eprint!` panics, and nothing more is written to it.
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::write_to(&mut std::io::stderr(), &$crate::STDERR_FAILED, format_args!($($arg)*))
    };
}

/// `eprintln!` through linkctl's `eprint!`.
macro_rules! eprintln {
    () => {
        eprint!("\n")
    };
    ($($arg:tt)*) => {
        eprint!("{}\n", format_args!($($arg)*))
    };
}

mod bench;
mod check;
mod coherence;
mod dl;
mod fabric;
mod link;
mod noise;
mod phy;
mod sim;
#[cfg(test)]
mod test_rng;
mod tl;
mod trace;
mod words;

#[derive(Parser, Debug)]
#[command(
    name = "linkctl",
    version,
    about = "Drive, test and measure the open accelerator link stack"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Physical layer tools: line coding and scrambling of raw data
    #[command(subcommand)]
    Phy(phy::PhyCommand),
    /// Data link layer tools
    #[command(subcommand)]
    Dl(dl::DlCommand),
    /// Bring up and exercise simulated links
    #[command(subcommand)]
    Link(link::LinkCommand),
    /// Measure per-core throughput against memcpy
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Collectives on a simulated fabric, reported as nccl-tests reports them
    #[command(subcommand)]
    Sim(Box<sim::SimCommand>),
    /// What the fabric manager makes of a topology: what its discovery of the hardware finds, trunks,
    /// endpoint IDs, routes, partitions, a check that the routes cannot deadlock, and a probe of what the
    /// switches let through; exit status 3 if the hardware is wired otherwise than the topology says, the
    /// routes could deadlock or the probe finds a partition not kept
    Fabric(fabric::FabricArgs),
    /// Cache coherence (directory MESI): a random stress over noisy data links, or `--explore` every
    /// interleaving of a small system; exit status 3 on any invariant violation, or a stress that does
    /// not complete
    Coherence(coherence::CoherenceArgs),
    /// Transactions between two endpoints: peer-to-peer copies over data links with errors
    #[command(subcommand)]
    Tl(tl::TlCommand),
}

/// Rust ignores SIGPIPE, so a write to a closed pipe (`linkctl ... | head`) fails and `println!` panics.
/// Command-line tools die of the signal instead, quietly; so does linkctl.
#[cfg(unix)]
#[allow(unsafe_code)]
fn die_quietly_on_closed_pipe() {
    // SAFETY: called first thing in `main`, before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The first write to standard output that failed (`println!`).
static STDOUT_FAILED: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// The first write to standard error that failed (`eprint!`): there is nowhere to say it, but it fails the
/// run.
static STDERR_FAILED: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// `line` and a newline to standard output, unless a write to it has failed; the first failure is kept
/// for `main` to report.
fn print_line(line: std::fmt::Arguments) {
    write_to(&mut std::io::stdout(), &STDOUT_FAILED, format_args!("{line}\n"));
}

/// `text` to `out`, unless a write to it has failed (`failed`); the first failure is kept in `failed`.
fn write_to(out: &mut dyn Write, failed: &Mutex<Option<std::io::Error>>, text: std::fmt::Arguments) {
    let mut failed = failed.lock().unwrap_or_else(PoisonError::into_inner);
    if failed.is_none() {
        if let Err(e) = out.write_fmt(text) {
            *failed = Some(e);
        }
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    die_quietly_on_closed_pipe();
    let cli = match parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let result = match cli.command {
        Command::Phy(cmd) => phy::run(cmd),
        Command::Dl(cmd) => dl::run(cmd),
        Command::Link(cmd) => link::run(cmd),
        Command::Bench(cmd) => bench::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Sim(cmd) => sim::run(*cmd),
        Command::Fabric(args) => fabric::run(args),
        Command::Tl(cmd) => tl::run(cmd),
        Command::Coherence(args) => coherence::run(args),
    };
    // A report that standard output would not take fails the run, whatever else came of it (said as
    // `phy encode`, which writes through `?`, says it).
    if let Some(e) = STDOUT_FAILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        eprintln!("linkctl: error: writing stdout: {e}");
        return ExitCode::FAILURE;
    }
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("linkctl: error: {e:#}");
            ExitCode::FAILURE
        }
    };
    // Progress or an error that standard error would not take fails the run too.
    if STDERR_FAILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some()
    {
        return ExitCode::FAILURE;
    }
    code
}

/// The command line `args` (the program's name first).
fn parse<I>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator,
    I::Item: Into<std::ffi::OsString> + Clone,
{
    let matches = negative_numbers_as_values(Cli::command()).try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// `cmd` with every option that takes a value taking a negative number as one, in every subcommand, so that
/// the option's own check refuses `--skew -1` or `--ber -0.1` by name, where clap had read the number as
/// an unknown flag (`unexpected argument '-0' found`).
fn negative_numbers_as_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|arg| {
        let takes_values = arg.get_action().takes_values();
        arg.allow_negative_numbers(takes_values)
    })
    .mut_subcommands(negative_numbers_as_values)
}

/// A command line clap cannot take: its first line, as every error the tool prints, and exit status 1
/// (clap's own 2 would read as `dl decode`'s damaged input). `--help` and `--version` print as clap
/// prints them.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        if let Err(err) = e.print() {
            let stream = if e.use_stderr() { "stderr" } else { "stdout" };
            eprintln!("linkctl: error: writing {stream}: {err}");
            return ExitCode::FAILURE;
        }
        return if e.use_stderr() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    // Clap writes what is wrong, then the missing arguments or a tip on lines of their own, then usage.
    let rendered = e.render().to_string();
    let mut lines = (rendered.lines())
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"));
    let mut message = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("error:")
        .trim()
        .to_string();
    for line in lines {
        message += if message.ends_with(':') { " " } else { "; " };
        message += line;
    }
    // The negative numbers clap still reads as flags (`--ber -1e-6`: no sign after an exponent, for
    // clap, so it saw `-1` and a cluster of short flags) are taken in the form that takes any value.
    let looks_negative = |arg: &str| {
        (arg.strip_prefix('-')).is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
    };
    if e.kind() == ErrorKind::UnknownArgument
        && matches!(e.get(ContextKind::InvalidArg), Some(ContextValue::String(arg)) if looks_negative(arg))
    {
        message += "; give a negative number as --OPTION=NUMBER";
    }
    eprintln!("linkctl: error: {message} (--help says what it takes)");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    /// Every `linkctl` command the README shows, in its examples block (a line's commands after `|` and
    /// between `;`) and in running text (a code span), with its redirections, pipes and comments cut off;
    /// spans that stand for a family (`...`, `<...>`, `phy|dl|tl`) are left out.
    fn readme_commands() -> Vec<String> {
        let readme = include_str!("../../README.md");
        let mut commands = Vec::new();
        let mut in_block = false;
        for line in readme.lines() {
            if line.starts_with("```") {
                in_block = line == "```sh";
                continue;
            }
            if in_block {
                let line = line.split(" #").next().unwrap_or_default();
                for part in line.split(';') {
                    // `cargo run -p linkctl -- ARGS` is `linkctl ARGS`.
                    if let Some(at) = part.find("linkctl ") {
                        commands.push(part[at..].replacen("linkctl -- ", "linkctl ", 1));
                    }
                }
            }
        }
        let text = readme.replace('\n', " ");
        for span in text.split('`').skip(1).step_by(2) {
            if span.starts_with("linkctl ")
                && !span.contains("...")
                && !span.contains('<')
                && !span.contains('|')
            {
                commands.push(span.to_owned());
            }
        }
        commands
            .into_iter()
            .map(|c| c.split(['<', '|']).next().unwrap_or_default().trim().to_owned())
            .collect()
    }

    #[test]
    fn every_command_the_readme_shows_parses() {
        let commands = readme_commands();
        assert!(commands.len() > 40, "{commands:?}");
        for command in commands {
            if let Err(e) = super::parse(command.split_whitespace()) {
                panic!("README: `{command}`: {e}");
            }
        }
    }
}
