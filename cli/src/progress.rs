//! A collection's progress on stderr: a line when each check's run starts and one when it is
//! settled, with its time; on a terminal, also a live bar of the checks settled, drawn below
//! the lines and cleared at the end.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use sf_host::collector::CollectEvent;
use sf_host::text_escape;

use crate::render::run_word;

/// What is drawn of one collection (nothing until it claims its attempt).
#[derive(Default)]
pub struct Progress {
    shown: Option<Shown>,
}

/// A collection under way: its bar (on a terminal) and its counts.
struct Shown {
    bar: Option<ProgressBar>,
    checks: usize,
    started: usize,
    settled: usize,
    began: Instant,
}

impl Progress {
    /// Shows one event of a collection.
    pub fn report(&mut self, event: sf_app::Progress<'_>) {
        match event {
            sf_app::Progress::Collecting { checks, .. } => self.shown = Some(Shown::new(checks)),
            sf_app::Progress::Run(event) => {
                if let Some(shown) = &mut self.shown {
                    shown.report(event);
                }
            }
        }
    }
}

impl Shown {
    fn new(checks: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(checks as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{spinner} {pos}/{len} checks settled, {elapsed}")
            {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            bar,
            checks,
            started: 0,
            settled: 0,
            began: Instant::now(),
        }
    }

    /// Reports one run's event: `sf: [started/checks] CHECK started` and `sf:
    /// [settled/checks] CHECK WORD in 1.2s (3.4s in all)`, with the run's first problem.
    fn report(&mut self, event: CollectEvent<'_>) {
        let checks = self.checks;
        let line = match event {
            CollectEvent::Started { check } => {
                self.started += 1;
                let at = self.started;
                // The start line comes with the first run, so a landing that runs nothing
                // (a replay) prints none.
                let start = if at == 1 {
                    format!("sf: running {checks} process check(s)\n")
                } else {
                    String::new()
                };
                format!("{start}sf: [{at}/{checks}] {check} started")
            }
            CollectEvent::Settled { run, elapsed } => {
                self.settled += 1;
                let at = self.settled;
                let took = format!(
                    "{:.1}s ({:.1}s in all)",
                    elapsed.as_secs_f64(),
                    self.began.elapsed().as_secs_f64()
                );
                let word = run_word(run);
                match run.problems.first() {
                    Some(problem) => format!(
                        "sf: [{at}/{checks}] {} {word} in {took}: {}",
                        run.check,
                        text_escape::line(problem)
                    ),
                    None => format!("sf: [{at}/{checks}] {} {word} in {took}", run.check),
                }
            }
        };
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                if matches!(event, CollectEvent::Settled { .. }) {
                    bar.inc(1);
                }
            }
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
