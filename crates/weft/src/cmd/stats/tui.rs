//! The full-screen live view of `weft stats` (ratatui over crossterm): the
//! header, file systems, operations beside the busiest RPC types, pagepool
//! beside metadata, and the NSD table, redrawn in place every interval.
//! `q`, Esc or Ctrl-C quits; the terminal is restored on every way out (a
//! guard on return and error, ratatui's panic hook on a panic).

use std::time::{Duration, Instant};

use anyhow::Result;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table as TableWidget, Wrap};
use ratatui::Frame;

use super::rates::Rates;
use super::scrape::Source;
use super::view::{Table, View};

/// Leaves raw mode and the alternate screen when dropped.
struct RestoreOnDrop;

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

fn wants_quit(k: &KeyEvent) -> bool {
    matches!(
        k.code,
        KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc
    ) || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL))
}

/// Runs the live view until quit, or for `count` refreshes.
pub fn run(source: &Source, interval: Duration, count: Option<u64>) -> Result<()> {
    // The first scrape before the screen changes: its error reads as usual.
    let mut prev = source.scrape()?;
    let url = source.url.to_string();
    let mut view = View::build(&prev, None, &url);
    let mut status = format!("collecting: rates after {:.1} s", interval.as_secs_f64());
    let _restore = RestoreOnDrop;
    let mut terminal = ratatui::try_init()?;
    let mut next = Instant::now() + interval;
    let mut refreshes = 0u64;
    loop {
        terminal.draw(|f| draw(f, &view, &status, interval))?;
        if count.is_some_and(|c| refreshes >= c) {
            return Ok(());
        }
        loop {
            let now = Instant::now();
            if now >= next {
                break;
            }
            if event::poll(next - now)? {
                match event::read()? {
                    Event::Key(k) if k.kind != KeyEventKind::Release && wants_quit(&k) => {
                        return Ok(())
                    }
                    Event::Resize(..) => {
                        terminal.draw(|f| draw(f, &view, &status, interval))?;
                    }
                    _ => {}
                }
            }
        }
        next += interval;
        let now = Instant::now();
        if next <= now {
            next = now + interval;
        }
        refreshes += 1;
        match source.scrape() {
            Ok(s) => {
                let r = Rates::between(&prev, &s);
                view = View::build(&s, Some(&r), &url);
                status = if r.restarted {
                    "the node restarted: rates count from its start".to_string()
                } else {
                    String::new()
                };
                prev = s;
            }
            Err(e) => status = format!("scrape failed, showing the last one: {e:#}"),
        }
    }
}

fn bold(s: &str) -> Span<'_> {
    Span::styled(s, Style::new().add_modifier(Modifier::BOLD))
}

fn pairs_line<'a>(pairs: &'a [(&'static str, String)]) -> Line<'a> {
    let mut spans = Vec::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw("   "));
        }
        // A no-break space keeps a label on the line of its value when wrapped.
        spans.push(Span::raw(format!("{k}\u{a0}")));
        spans.push(bold(v));
    }
    Line::from(spans)
}

/// Terminals narrower than this stack the side-by-side blocks.
const WIDE: u16 = 110;

/// Column widths and spacing that fit `inner` columns of screen: as wide as
/// their cells, spacing 2 (or 1 when tight), and the columns that still do not
/// fit left out from the right, so that a number is never cut.
fn fit_columns(t: &Table, inner: u16) -> (Vec<u16>, u16) {
    let mut widths: Vec<u16> = t.headers.iter().map(|h| h.len() as u16).collect();
    for row in &t.rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count().min(40) as u16);
        }
    }
    let total = |ws: &[u16], gap: u16| -> u32 {
        ws.iter()
            .map(|&w| u32::from(w) + u32::from(gap))
            .sum::<u32>()
            - u32::from(gap)
    };
    let gap = if total(&widths, 2) <= u32::from(inner) {
        2
    } else {
        1
    };
    while widths.len() > 1 && total(&widths, gap) > u32::from(inner) {
        widths.pop();
    }
    (widths, gap)
}

/// A bordered table with right-aligned numbers, fitted to `width`.
fn table_widget(t: &Table, width: u16) -> TableWidget<'_> {
    let (widths, gap) = fit_columns(t, width.saturating_sub(2));
    let shown = widths.len();
    let align = |i: usize| {
        if i < t.left {
            Alignment::Left
        } else {
            Alignment::Right
        }
    };
    let header = Row::new(
        t.headers
            .iter()
            .take(shown)
            .enumerate()
            .map(|(i, h)| Cell::from(Line::from(bold(h)).alignment(align(i)))),
    );
    let rows = t.rows.iter().map(move |row| {
        Row::new(
            row.iter()
                .take(shown)
                .enumerate()
                .map(|(i, c)| Cell::from(Line::from(c.as_str()).alignment(align(i)))),
        )
    });
    let block = Block::bordered().title(Line::from(bold(t.title)));
    TableWidget::new(rows, widths.into_iter().map(Constraint::Length))
        .header(header)
        .column_spacing(gap)
        .block(block)
}

/// Height of a bordered table with `rows` rows (at least one, for "no activity").
fn table_height(t: &Table) -> u16 {
    t.rows.len().max(1) as u16 + 3
}

/// How many rows a block needs at least (else it is left out) and would use.
#[derive(Clone, Copy)]
struct Want {
    min: u16,
    want: u16,
}

/// Heights for blocks in display order out of `total` rows: blocks get their
/// minimum in `priority` order while rows last (the rest get 0 and are left
/// out), then rows up to what they want, again by priority.
fn allot(total: u16, wants: &[Want], priority: &[usize]) -> Vec<u16> {
    let mut heights = vec![0u16; wants.len()];
    let mut left = total;
    for &i in priority {
        if let (Some(w), Some(h)) = (wants.get(i), heights.get_mut(i)) {
            if w.min <= left {
                *h = w.min;
                left -= w.min;
            }
        }
    }
    for &i in priority {
        if let (Some(w), Some(h)) = (wants.get(i), heights.get_mut(i)) {
            if *h > 0 {
                let extra = w.want.saturating_sub(*h).min(left);
                *h += extra;
                left -= extra;
            }
        }
    }
    heights
}

/// A bordered table's rows: at least its header and one row.
fn table_want(t: &Table) -> Want {
    Want {
        min: 4,
        want: table_height(t),
    }
}

/// Draws one refresh: the blocks that fit, the most telling ones first
/// (header, file systems, NSDs, operations, pagepool, metadata, RPC).
pub fn draw(frame: &mut Frame, view: &View, status: &str, interval: Duration) {
    let area = frame.area();
    let wide = area.width >= WIDE;
    let header_line = pairs_line(&view.header);
    let inner = usize::from(area.width.saturating_sub(2).max(1));
    let header_h = (header_line.width().div_ceil(inner).clamp(1, 3) + 2) as u16;
    let per_line = if wide { 2 } else { 3 };
    let pagepool_lines: Vec<Line> = view.pagepool.chunks(per_line).map(pairs_line).collect();
    let pagepool_h = pagepool_lines.len() as u16 + 2;
    let pagepool = Paragraph::new(pagepool_lines)
        .wrap(Wrap { trim: true })
        .block(Block::bordered().title(Line::from(bold("Pagepool"))));
    let header = Paragraph::new(header_line)
        .wrap(Wrap { trim: true })
        .block(Block::bordered().title(Line::from(bold("weft stats"))));
    let fixed = |h: u16| Want { min: h, want: h };
    let pair = |a: Want, b: Want| Want {
        min: a.min.max(b.min),
        want: a.want.max(b.want),
    };
    let (ops, rpc, meta) = (
        table_want(&view.ops),
        table_want(&view.rpc),
        table_want(&view.meta),
    );
    // Display order; priority lists indexes into it.
    let (wants, priority): (Vec<Want>, &[usize]) = if wide {
        (
            vec![
                fixed(header_h),
                table_want(&view.fs),
                pair(ops, rpc),
                pair(fixed(pagepool_h), meta),
                table_want(&view.nsd),
            ],
            &[0, 1, 4, 2, 3],
        )
    } else {
        (
            vec![
                fixed(header_h),
                table_want(&view.fs),
                ops,
                rpc,
                fixed(pagepool_h),
                meta,
                table_want(&view.nsd),
            ],
            &[0, 1, 6, 2, 4, 5, 3],
        )
    };
    let heights = allot(area.height.saturating_sub(1), &wants, priority);
    let mut y = area.y;
    let mut rects = heights.iter().map(|&h| {
        let r = Rect::new(area.x, y, area.width, h);
        y += h;
        r
    });
    let mut next = || rects.next().unwrap_or_default();
    let halves = [Constraint::Percentage(50), Constraint::Percentage(50)];
    frame.render_widget(header, next());
    render_table(frame, &view.fs, next());
    if wide {
        let [ops, rpc] = Layout::horizontal(halves).areas(next());
        render_table(frame, &view.ops, ops);
        render_table(frame, &view.rpc, rpc);
        let [pp, meta] = Layout::horizontal(halves).areas(next());
        frame.render_widget(pagepool, pp);
        render_table(frame, &view.meta, meta);
    } else {
        render_table(frame, &view.ops, next());
        render_table(frame, &view.rpc, next());
        frame.render_widget(pagepool, next());
        render_table(frame, &view.meta, next());
    }
    render_table(frame, &view.nsd, next());
    let help = format!(
        "q/Esc quit   refresh {:.1} s   {status}",
        interval.as_secs_f64()
    );
    let footer = Rect::new(area.x, area.bottom().saturating_sub(1), area.width, 1);
    frame.render_widget(Paragraph::new(help), footer.intersection(area));
}

fn render_table(frame: &mut Frame, t: &Table, area: Rect) {
    if t.rows.is_empty() {
        let block = Block::bordered().title(Line::from(bold(t.title)));
        frame.render_widget(Paragraph::new("  (no activity)").block(block), area);
    } else {
        frame.render_widget(table_widget(t, area.width), area);
    }
}

#[cfg(test)]
mod tests {
    use super::super::view::tests::samples;
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn screen(view: &View, status: &str, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, view, status, Duration::from_secs(1)))
            .unwrap();
        let buf = t.backend().buffer();
        let mut out = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                out.push_str(&buf[(x, y)].symbol().replace('\u{a0}', " "));
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn renders_headers_and_figures() {
        let (a, b) = samples();
        let r = Rates::between(&a, &b);
        let v = View::build(&b, Some(&r), "http://127.0.0.1:9191/metrics");
        let s = screen(&v, "", 160, 50);
        for want in [
            "weft stats",
            "node n1@c1",
            "http://127.0.0.1:9191/metrics",
            "uptime 3d 01:00:00",
            "cpu 50.0%",
            "File systems",
            "read MiB/s",
            "2802.0",
            "Operations",
            "errors/s",
            "create",
            "0.500",
            "RPC (top 8)",
            "calls/s",
            "Getattr",
            "Pagepool",
            "hit 90.0%",
            "written behind 128.0 MiB/s",
            "Metadata",
            "commit batches/s",
            "locks held",
            "NSDs",
            "reads/s",
            "cksum",
            "capacity",
            "free %",
            "nsd2",
            "16.667",
            "100.0 GiB",
            "q/Esc quit",
        ] {
            assert!(s.contains(want), "{want:?} missing in\n{s}");
        }
    }

    #[test]
    fn first_refresh_and_small_terminals() {
        let (a, _) = samples();
        let v = View::build(&a, None, "u");
        let s = screen(&v, "collecting: rates after 1.0 s", 100, 40);
        assert!(s.contains("(no activity)"), "{s}");
        assert!(s.contains("collecting"), "{s}");
        // Too small to show much: still no panic.
        let _ = screen(&v, "", 10, 3);
        let _ = screen(&v, "", 1, 1);
    }

    #[test]
    fn narrow_terminals_drop_columns_rather_than_cut_numbers() {
        let (a, b) = samples();
        let r = Rates::between(&a, &b);
        let v = View::build(&b, Some(&r), "http://127.0.0.1:9191/metrics");
        // 80 columns: blocks stacked, every table whole.
        let s = screen(&v, "", 80, 70);
        for want in [
            "100.0 GiB",
            "free %",
            "WriteChunk",
            "errors/s",
            "locks held",
            "cpu 50.0%",
        ] {
            assert!(s.contains(want), "{want:?} missing in\n{s}");
        }
        // Narrower: trailing columns left out, the shown ones whole.
        for inner in [10u16, 30, 45, 60] {
            let (widths, gap) = fit_columns(&v.nsd, inner);
            let used: u16 = widths.iter().sum::<u16>() + gap * (widths.len() as u16 - 1);
            assert!(used <= inner || widths.len() == 1, "{inner}: {widths:?}");
            assert!(widths.len() < v.nsd.headers.len());
        }
        let s = screen(&v, "", 50, 70);
        assert!(!s.contains(" 0.0 GiB"), "{s}");
        assert!(s.contains("reads/s"), "{s}");
    }

    #[test]
    fn short_terminals_keep_the_most_telling_blocks() {
        let w = |min, want| Want { min, want };
        let wants = [w(3, 3), w(4, 6), w(4, 10), w(4, 5)];
        // Everything fits: everyone gets what it wants.
        assert_eq!(allot(40, &wants, &[0, 1, 3, 2]), [3, 6, 10, 5]);
        // Minimums by priority, then the rest by priority.
        assert_eq!(allot(16, &wants, &[0, 1, 3, 2]), [3, 5, 4, 4]);
        assert_eq!(allot(12, &wants, &[0, 1, 3, 2]), [3, 5, 0, 4]);
        assert_eq!(allot(2, &wants, &[0, 1, 3, 2]), [0, 0, 0, 0]);
        let (a, b) = samples();
        let v = View::build(&b, Some(&Rates::between(&a, &b)), "u");
        let s = screen(&v, "", 80, 24);
        for want in ["File systems", "NSDs", "nsd2", "Operations", "q/Esc quit"] {
            assert!(s.contains(want), "{want:?} missing in\n{s}");
        }
    }

    #[test]
    fn quit_keys() {
        let key = |c, m| KeyEvent::new(c, m);
        assert!(wants_quit(&key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(wants_quit(&key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(wants_quit(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!wants_quit(&key(KeyCode::Char('c'), KeyModifiers::NONE)));
    }
}
