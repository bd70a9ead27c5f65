'use strict';
// recover audit --html: draws the journal's facts. Every text from the journal goes in as
// text (textContent), never as markup; pages of calls are parsed only when shown.
(function () {
  const summary = JSON.parse(document.getElementById('summary-data').textContent);
  const blocks = Array.prototype.slice.call(document.querySelectorAll('script.page'));
  const OUTCOMES = {
    ok: ['\u2713', 'ok'], error: ['\u2717', 'error'], refused: ['\u2298', 'refused (never ran)'],
    not_started: ['\u25cb', 'TOOL_NOT_STARTED'], unknown: ['?', 'TOOL_OUTCOME_UNKNOWN'],
    in_flight: ['\u2026', 'in flight'],
  };
  const PHASES = [
    ['deciding', 'received \u2192 decided'], ['approval', 'waiting for approval'],
    ['queued', 'approved, waiting to start (pool, path lock or barrier)'], ['running', 'running'],
    ['settling', 'settled, waiting to commit in model order'], ['refused', 'refused, then committed'],
  ];
  let page = -1;
  let rows = [];
  let selected = -1;

  // Characters that change how the text around them looks without showing themselves (the
  // ranges the terminal displays use, handed over in the summary) and control characters but a
  // newline and a tab: shown as `\u{XXXX}`, so that what is seen is what the bytes say.
  const HIDDEN = new RegExp('[' + [[0, 8], [0x0b, 0x1f], [0x7f, 0x9f]].concat(summary.hidden || [])
    .map(function (r) { return '\\u{' + r[0].toString(16) + '}-\\u{' + r[1].toString(16) + '}'; })
    .join('') + ']', 'gu');
  function shown(value) {
    return String(value).replace(HIDDEN, function (ch) {
      return '\\u{' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '}';
    });
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = shown(text);
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function time(ms) {
    if (typeof ms !== 'number') return '-';
    return new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
  }
  function span(ms) {
    if (typeof ms !== 'number' || ms < 0) return '-';
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
  }
  function dlRow(dl, term, value) {
    add(dl, el('dt', null, term));
    const dd = add(dl, el('dd'));
    if (value instanceof Node) dd.appendChild(value); else dd.textContent = shown(value);
    return dd;
  }

  // ---- summary ----
  function drawSummary() {
    const head = document.getElementById('summary');
    add(head, el('h1', null, 'Audit of ' + summary.journal));
    const dl = add(head, el('dl'));
    dlRow(dl, 'Session', summary.session || '(no session/open)');
    if (summary.imported) dlRow(dl, 'Imported from', summary.imported);
    if (summary.import_lines && summary.import_lines.length > 0) {
      const found = el('details');
      add(found, el('summary', null, summary.import_lines.length + ' lines' +
        (summary.import_lines_elided ? ' (and ' + summary.import_lines_elided +
          ' more: `recover audit` lists every one)' : '')));
      const list = add(found, el('ul'));
      summary.import_lines.forEach(function (line) { add(list, el('li', null, line)); });
      dlRow(dl, 'Reading the file found', found);
    }
    dlRow(dl, 'Model', summary.model || '(not journaled)');
    if (summary.sandbox) dlRow(dl, 'Sandbox', summary.sandbox);
    const ended = dlRow(dl, 'How the journal ended', summary.ended.text);
    ended.className = 'ended-' + summary.ended.how;
    if (summary.ended.recoveries > 0) {
      dlRow(dl, 'Recoveries', summary.ended.recoveries + ' (each crash is marked on the timeline)');
    }
    const t = summary.totals;
    dlRow(dl, 'Calls', t.calls + ' calls: ' + t.ok + ' ok, ' + t.errors + ' errors, ' +
      t.not_started + ' not started, ' + t.outcome_unknown + ' outcome unknown; ' +
      t.side_effects + ' side effects');
    const u = summary.usage;
    dlRow(dl, 'Usage', u.responses === 0 ? 'not journaled' :
      u.input_tokens + ' input tokens (' + u.cached_input_tokens + ' cached), ' +
      u.output_tokens + ' output tokens, over ' + u.responses + ' responses');
    const tools = el('details');
    add(tools, el('summary', null, summary.tools.length + ' tools' +
      (summary.tools_elided ? ' (and ' + summary.tools_elided + ' more not listed)' : '')));
    const ul = add(tools, el('ul'));
    summary.tools.forEach(function (tool) { add(ul, el('li', null, tool.name + ' \u2014 ' + tool.source)); });
    dlRow(dl, 'Tools', tools);
    if (summary.elided) {
      const e = summary.elided;
      add(head, el('p', 'note', 'To stay under its bound of ' + summary.bytes_max + ' bytes, this ' +
        'page leaves out ' + e.calls + ' calls and ' + e.steps + ' steps (turns ' + e.first_turn +
        ' to ' + e.last_turn + ') between the session\u2019s beginning and its end. ' +
        '`recover audit --json` lists every call.'));
    }
    if (summary.marks_elided) {
      add(head, el('p', 'note', summary.marks_elided + ' more markers (stops, faults, crashes) are not drawn.'));
    }
    const legend = add(head, el('div', 'legend'));
    legend.setAttribute('aria-label', 'Legend');
    Object.keys(OUTCOMES).forEach(function (k) {
      const s = add(legend, el('span', 'o-' + k));
      add(s, el('span', 'word', OUTCOMES[k][0] + ' ' + OUTCOMES[k][1]));
    });
    PHASES.forEach(function (p) {
      const s = add(legend, el('span'));
      const sw = add(s, el('span', 'swatch seg ' + p[0]));
      sw.style.position = 'static';
      add(s, el('span', null, p[1]));
    });
    add(legend, el('span', null, 'shaded band: ran alone while others waited (a barrier)'));
  }

  // ---- pager ----
  function drawPager() {
    const nav = document.getElementById('pager');
    const prev = add(nav, el('button', null, '\u2190 Previous'));
    const label = add(nav, el('span', 'where'));
    const next = add(nav, el('button', null, 'Next \u2192'));
    const last = add(nav, el('button', null, 'Last page'));
    prev.id = 'prev';
    next.id = 'next';
    last.id = 'last';
    label.id = 'where';
    const gap = add(nav, el('span', 'gap'));
    add(nav, el('span', 'hint', 'Keys: \u2191/\u2193 or j/k move between calls, Enter shows one, n/p change page.'));
    prev.addEventListener('click', function () { show(page - 1); });
    next.addEventListener('click', function () { show(page + 1); });
    last.addEventListener('click', function () { show(blocks.length - 1); });
    nav.update = function () {
      label.textContent = blocks.length ? 'Page ' + (page + 1) + ' of ' + blocks.length : 'No calls';
      prev.disabled = page <= 0;
      next.disabled = page >= blocks.length - 1;
      last.disabled = page >= blocks.length - 1;
      gap.textContent = blocks[page] && blocks[page].dataset.gap ? 'Calls before this page were left out (see the note above).' : '';
    };
  }

  // ---- timeline ----
  function crashAfter(ms) {
    let best = null;
    summary.marks.forEach(function (m) {
      if ((m.kind === 'crash' || m.kind === 'live') && m.at >= ms && (best === null || m.at < best)) best = m.at;
    });
    return best;
  }
  function callEnd(c) {
    const t = c.times || {};
    const crash = crashAfter(t.received || 0);
    if (c.recovered || t.committed === null || t.committed === undefined) {
      const known = [t.settled, t.started, t.refused, t.approved, t.asked, t.received].filter(function (x) { return typeof x === 'number'; });
      const last = Math.max.apply(null, known);
      return crash !== null && crash >= last ? crash : last;
    }
    return t.committed;
  }
  function phases(c) {
    const t = c.times || {};
    const end = callEnd(c);
    const out = [];
    const first = function () { for (let i = 0; i < arguments.length; i++) if (typeof arguments[i] === 'number') return arguments[i]; return end; };
    if (typeof t.received !== 'number') return out;
    out.push(['deciding', t.received, first(t.asked, t.approved, t.refused, t.started)]);
    if (typeof t.asked === 'number') out.push(['approval', t.asked, first(t.approved, t.refused)]);
    if (typeof t.approved === 'number') out.push(['queued', t.approved, first(t.started, t.refused)]);
    if (typeof t.started === 'number') out.push(['running', t.started, first(t.settled)]);
    if (typeof t.settled === 'number') out.push(['settling', t.settled, c.recovered ? end : first(t.committed)]);
    if (typeof t.refused === 'number') out.push(['refused', t.refused, c.recovered ? end : first(t.committed)]);
    if (c.outcome === 'not_started' && typeof t.started !== 'number') out.push(['never', first(t.approved, t.asked, t.received), end]);
    return out;
  }
  function barriers(group) {
    const found = [];
    group.forEach(function (c) {
      const t = c.times || {};
      if (typeof t.started !== 'number') return;
      const to = typeof t.settled === 'number' ? t.settled : callEnd(c);
      let alone = true;
      let waited = 0;
      group.forEach(function (d) {
        if (d === c) return;
        const u = d.times || {};
        if (typeof u.started !== 'number') {
          if (typeof u.approved === 'number' && u.approved <= t.started) waited++;
          return;
        }
        const uto = typeof u.settled === 'number' ? u.settled : callEnd(d);
        if (u.started < to && uto > t.started) alone = false;
        else if (typeof u.approved === 'number' && u.approved <= t.started && u.started >= to) waited++;
      });
      if (alone && waited > 0) found.push({ call: c, from: t.started, to: to, waited: waited });
    });
    return found;
  }
  function drawGroup(main, step, group) {
    const sec = add(main, el('section', 'step'));
    const header = add(sec, el('header'));
    const turn = step ? step.turn : group[0].turn;
    const number = step ? step.step : group[0].step;
    const t0s = [];
    const t1s = [];
    if (step && typeof step.begun === 'number') t0s.push(step.begun);
    if (step && typeof step.ended === 'number') t1s.push(step.ended);
    group.forEach(function (c) { if (c.times) { t0s.push(c.times.received); t1s.push(callEnd(c)); } });
    const t0 = t0s.length ? Math.min.apply(null, t0s) : 0;
    let t1 = t1s.length ? Math.max.apply(null, t1s) : t0;
    // A marker that names its step is drawn there only; one that names none, where its
    // time falls.
    const marks = summary.marks.filter(function (m) {
      if (m.turn !== null) {
        return m.turn === turn && (m.step === 0 || m.step === number) && (m.step !== 0 || m.at >= t0);
      }
      return m.at >= t0 && m.at <= t1;
    });
    marks.forEach(function (m) { t1 = Math.max(t1, m.at); });
    if (t1 <= t0) t1 = t0 + 1;
    const x = function (ms) { return Math.max(0, Math.min(100, (ms - t0) / (t1 - t0) * 100)); };
    add(header, el('h3', null, 'Turn ' + turn + ', step ' + number));
    const bits = [group.length + (group.length === 1 ? ' call' : ' calls'), span(t1 - t0)];
    if (step) {
      bits.push(step.open ? 'still open when the journal ended' : (step.outcome || 'no step/end'));
      if (step.stop_reason) bits.push('model stopped: ' + step.stop_reason);
    } else {
      bits.push('continued from the previous page');
    }
    add(header, el('span', 'meta', bits.join(' \u00b7 ')));
    add(header, el('span', 'meta', 'from ' + time(t0)));
    if (!group.length) return;
    const axis = add(sec, el('div', 'axis'));
    add(axis, el('span', null, '0'));
    add(axis, el('span', null, span(Math.round((t1 - t0) / 2))));
    add(axis, el('span', null, span(t1 - t0)));
    const box = add(sec, el('div', 'rows'));
    const overlay = function (cls, from, to) {
      const o = el('div', cls);
      o.style.left = 'calc(14rem + (100% - 28rem) * ' + (x(from) / 100) + ')';
      if (to !== undefined) o.style.width = 'calc((100% - 28rem) * ' + ((x(to) - x(from)) / 100) + ')';
      return add(box, o);
    };
    if (marks.length) box.classList.add('marked');
    marks.forEach(function (m) {
      const mk = overlay('marker ' + m.kind, m.at);
      add(mk, el('span', null, m.kind === 'crash' ? '\u26a1 crash' : m.kind === 'stop' ? '\u25a0 stop' : m.kind === 'live' ? 'live' : '! fault'));
      mk.title = shown(m.text);
      mk.setAttribute('role', 'note');
      mk.setAttribute('aria-label', shown(m.text) + ' at ' + time(m.at));
    });
    const alone = barriers(group);
    alone.forEach(function (b) {
      const band = overlay('barrier', b.from, b.to);
      band.title = shown(b.call.id) + ' ran alone while ' + b.waited + ' waited';
      b.call.barrier = b.waited;
    });
    group.forEach(function (c) { drawRow(box, c, x); });
  }
  function drawRow(box, c, x) {
    const o = OUTCOMES[c.outcome] || ['', c.outcome];
    const row = add(box, el('div', 'row o-' + c.outcome));
    row.setAttribute('role', 'button');
    row.tabIndex = -1;
    row.dataset.callId = c.id;
    row.setAttribute('aria-label', shown('call ' + c.id + ', ' + c.tool + ': ' + c.label));
    const label = add(row, el('span', 'label'));
    add(label, el('span', 'icon', o[0] + ' '));
    add(label, el('span', 'id', c.id + ' '));
    add(label, el('span', 'tool', c.tool));
    const track = add(row, el('div', 'track'));
    const bar = add(track, el('div', 'bar'));
    bar.dataset.callId = c.id;
    const ph = phases(c);
    const lo = ph.length ? x(ph[0][1]) : 0;
    const hi = ph.length ? Math.max.apply(null, ph.map(function (p) { return x(p[2]); })) : lo;
    bar.style.left = lo + '%';
    bar.style.width = Math.max(hi - lo, 0.3) + '%';
    ph.forEach(function (p) {
      const seg = add(bar, el('div', 'seg ' + p[0]));
      const w = hi - lo || 1;
      seg.style.left = ((x(p[1]) - lo) / w * 100) + '%';
      seg.style.width = ((x(p[2]) - x(p[1])) / w * 100) + '%';
      seg.title = shown(p[0]) + ': ' + span(p[2] - p[1]);
    });
    add(row, el('span', 'word', o[0] + ' ' + c.label + (c.barrier ? ' \u00b7 ran alone' : '')));
    const index = rows.length;
    rows.push({ row: row, call: c });
    row.addEventListener('click', function () { select(index, true); });
  }
  function show(n) {
    if (n < 0 || n >= blocks.length) return;
    page = n;
    rows = [];
    selected = -1;
    const main = document.getElementById('timeline');
    main.textContent = '';
    if (blocks[n].dataset.gap) {
      const e = summary.elided;
      add(main, el('p', 'elided', e ? e.calls + ' calls and ' + e.steps + ' steps left out here (turns ' + e.first_turn + ' to ' + e.last_turn + ').' : 'Calls left out here.'));
    }
    const items = JSON.parse(blocks[n].textContent);
    let step = null;
    let group = [];
    let open = false;
    const flush = function () { if (open) drawGroup(main, step, group); open = false; group = []; };
    items.forEach(function (it) {
      if (it.k === 'turn') {
        flush();
        step = null;
        const h = add(main, el('h2', 'turn', 'Turn ' + it.turn));
        add(h, el('span', 'said', 'the user said: \u201c' + it.text + '\u201d'));
      } else if (it.k === 'step') {
        flush();
        step = it;
        open = true;
      } else if (it.k === 'call') {
        if (!step || step.turn !== it.turn || step.step !== it.step) {
          flush();
          step = null;
        }
        open = true;
        group.push(it);
      }
    });
    flush();
    document.getElementById('pager').update();
    if (rows.length) select(0, false);
  }

  // ---- details ----
  function pre(text, full) {
    const box = el('div');
    add(box, el('pre', null, text === '' ? '(empty)' : text));
    if (full > text.length) add(box, el('span', 'cut', 'the first ' + text.length + ' characters of ' + full + ' bytes'));
    return box;
  }
  function list(items, none) {
    if (!items || !items.length) return el('span', 'hint', none);
    const ul = el('ul');
    items.forEach(function (i) { add(ul, el('li', null, i)); });
    return ul;
  }
  function timings(c) {
    const t = c.times || {};
    const table = el('table');
    [['received', 'received'], ['asked', 'asked a person'], ['approved', 'approved'],
      ['refused', 'refused or cancelled'], ['started', 'started'], ['settled', 'settled'],
      ['committed', c.recovered ? 'given a result by recovery' : 'committed']].forEach(function (p) {
      if (typeof t[p[0]] !== 'number') return;
      const tr = add(table, el('tr'));
      add(tr, el('td', null, p[1]));
      add(tr, el('td', null, time(t[p[0]])));
      add(tr, el('td', null, '+' + span(t[p[0]] - t.received)));
    });
    return table;
  }
  function describe(c) {
    const d = document.getElementById('details');
    d.textContent = '';
    add(d, el('h2', null, 'Call ' + c.id));
    const dl = add(d, el('dl'));
    dlRow(dl, 'Tool', c.tool + ' (' + c.source + ')');
    dlRow(dl, 'Turn, step', c.turn + ', ' + c.step);
    const t = c.times || {};
    const pending = c.recovered && typeof t.committed !== 'number';
    dlRow(dl, 'Outcome', (OUTCOMES[c.outcome] || [''])[0] + ' ' + c.label + ' \u2014 last state ' + c.state +
      (pending ? '; no result journaled: not recovered yet' : c.recovered ? '; result given by recovery' : ''));
    dlRow(dl, 'Decision', c.decision);
    dlRow(dl, 'Arguments', pre(c.arguments, c.arguments_bytes));
    dlRow(dl, pending ? 'Result recovery would commit' : 'Result', pre(c.result, c.result_bytes));
    dlRow(dl, 'Side effects', list(c.effects, 'none recorded')).className = 'effects';
    dlRow(dl, 'Evidence recorded before it ran', list(c.evidence, 'none'));
    dlRow(dl, 'Declared resources', list(c.resources, 'none'));
    dlRow(dl, 'Idempotency key', c.key || '-');
    if (c.question) dlRow(dl, 'Question', pre(c.question, c.question.length));
    dlRow(dl, 'Body ran for', c.duration_ms === null ? '-' : span(c.duration_ms));
    if (c.barrier) dlRow(dl, 'Scheduling', 'ran alone while ' + c.barrier + (c.barrier === 1 ? ' other call' : ' other calls') + ' waited');
    dlRow(dl, 'Timings', timings(c));
  }
  function select(i, focus) {
    if (i < 0 || i >= rows.length) return;
    if (selected >= 0) {
      rows[selected].row.setAttribute('aria-selected', 'false');
      rows[selected].row.tabIndex = -1;
    }
    selected = i;
    const r = rows[i].row;
    r.setAttribute('aria-selected', 'true');
    r.tabIndex = 0;
    if (focus) r.focus();
    describe(rows[i].call);
  }
  document.addEventListener('keydown', function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const k = e.key;
    if (k === 'ArrowDown' || k === 'j') select(selected + 1, true);
    else if (k === 'ArrowUp' || k === 'k') select(selected - 1, true);
    else if (k === 'Home') select(0, true);
    else if (k === 'End') select(rows.length - 1, true);
    else if (k === 'n' || k === 'PageDown') { show(page + 1); if (rows.length) rows[0].row.focus(); }
    else if (k === 'p' || k === 'PageUp') { show(page - 1); if (rows.length) rows[0].row.focus(); }
    else if ((k === 'Enter' || k === ' ') && selected >= 0 && document.activeElement === rows[selected].row) {
      document.getElementById('details').focus();
    } else return;
    e.preventDefault();
  });

  drawSummary();
  drawPager();
  if (blocks.length) show(0); else document.getElementById('pager').update();
})();
