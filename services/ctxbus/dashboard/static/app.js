// ctxbus dashboard: renders the server's snapshots (aggregates + the last rows) as they arrive over
// Server-Sent Events (or, without EventSource, by polling /api/snapshot). No library, no network
// beyond this server; every text from an event goes through textContent, never innerHTML.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const STAGE_NAMES = {
    end_to_end: "end to end",
    retrieval: "retrieval",
    assembly: "assembly",
    transit: "queue + transit",
    delivery: "to dashboard",
  };
  const TICK_LABELS = {
    0.01: "10 µs", 0.1: "0.1 ms", 1: "1 ms", 10: "10 ms", 100: "100 ms", 1000: "1 s", 10000: "10 s",
    100000: "100 s", 1000000: "1000 s",
  };
  const seen = new Set();
  let source = null;
  let pollTimer = null;
  let firstRender = true;

  // ------------------------------------------------------------------ helpers

  function $(id) { return document.getElementById(id); }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else node.setAttribute(k, v);
    }
    for (const child of children || []) node.appendChild(child);
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function title(node, text) {
    node.appendChild(svg("title", {}, text));
    return node;
  }

  function fmtInt(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }

  function fmtMs(v) {
    if (v === null || v === undefined) return "–";
    if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 1 : 2) + " s";
    if (v >= 100) return v.toFixed(0) + " ms";
    if (v >= 10) return v.toFixed(1) + " ms";
    return v.toFixed(2) + " ms";
  }

  function plural(n, word) { return `${fmtInt(n)} ${word}${n === 1 ? "" : "s"}`; }

  function pad(n) { return String(n).padStart(2, "0"); }

  function fmtTime(epoch, withSeconds) {
    if (!epoch) return "–";
    const d = new Date(epoch * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (withSeconds === false ? "" : ":" + pad(d.getSeconds()));
  }

  function shortChars(n) { return n >= 1000 ? (n / 1000).toFixed(n % 1000 ? 1 : 0) + "k" : String(n); }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const exp = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * exp >= v) return m * exp;
    return 10 * exp;
  }

  function replace(container, node) {
    container.replaceChildren(node);
  }

  function noData(width, height, text) {
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" });
    root.appendChild(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "nodata" }, text));
    return root;
  }

  // ------------------------------------------------------------------ charts

  function minutesChart(minutes) {
    const W = 640, H = 200, L = 36, R = 8, T = 10, B = 22;
    const total = minutes.reduce((a, m) => a + m.injections + m.dead_letters, 0);
    if (!total) return noData(W, H, "no injections in the last hour");
    const top = niceMax(Math.max(...minutes.map((m) => Math.max(m.injections, m.dead_letters))));
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "injections per minute" });
    const plotW = W - L - R, plotH = H - T - B, step = plotW / minutes.length;
    const y = (v) => T + plotH - (v / top) * plotH;
    for (const f of [0, 0.5, 1]) {
      root.appendChild(svg("line", { x1: L, x2: W - R, y1: y(top * f), y2: y(top * f), class: "gridline" }));
      root.appendChild(svg("text", { x: L - 6, y: y(top * f) + 3, "text-anchor": "end" }, fmtInt(top * f)));
    }
    minutes.forEach((m, i) => {
      const x = L + i * step + 1, w = Math.max(1, step - 2);
      const full = m.injections - m.empty;
      const tip = `${fmtTime(m.t, false)}: ${m.injections} injections (${m.empty} empty), ${m.dead_letters} dead letters`;
      if (full > 0) root.appendChild(title(svg("rect", { x, y: y(full), width: w, height: y(0) - y(full), class: "bar-ok" }), tip));
      if (m.empty > 0) {
        root.appendChild(title(svg("rect", { x, y: y(m.injections), width: w, height: y(full) - y(m.injections), class: "bar-empty" }), tip));
      }
      if (m.dead_letters > 0) root.appendChild(title(svg("circle", { cx: x + w / 2, cy: y(m.dead_letters), r: 3, class: "dot-dead" }), tip));
      if (i % 10 === 0 || i === minutes.length - 1) {
        const last = i === minutes.length - 1;
        root.appendChild(svg("text", { x: last ? x + w : x + w / 2, y: H - 6, "text-anchor": last ? "end" : "middle" }, fmtTime(m.t, false)));
      }
    });
    return root;
  }

  function e2eChart(minutes) {
    const W = 640, H = 200, L = 52, R = 8, T = 10, B = 22;
    const values = minutes.flatMap((m) => [m.e2e_p50, m.e2e_p99]).filter((v) => v !== null);
    if (!values.length) return noData(W, H, "no end-to-end latencies yet");
    const top = niceMax(Math.max(...values));
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "end-to-end latency per minute" });
    const plotW = W - L - R, plotH = H - T - B, step = plotW / minutes.length;
    const y = (v) => T + plotH - (v / top) * plotH;
    const x = (i) => L + i * step + step / 2;
    for (const f of [0, 0.5, 1]) {
      root.appendChild(svg("line", { x1: L, x2: W - R, y1: y(top * f), y2: y(top * f), class: "gridline" }));
      root.appendChild(svg("text", { x: L - 6, y: y(top * f) + 3, "text-anchor": "end" }, fmtMs(top * f)));
    }
    const points = [];
    for (const [key, cls] of [["e2e_p99", "line-p99"], ["e2e_p50", "line-p50"]]) {
      let d = "";
      let pen = false;
      minutes.forEach((m, i) => {
        const v = m[key];
        if (v === null) { pen = false; return; }
        d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1) + " ";
        pen = true;
        points.push(title(svg("circle", { cx: x(i), cy: y(v), r: 3, class: cls.replace("line", "bar") }),
          `${fmtTime(m.t, false)} ${key.slice(4)}: ${fmtMs(v)}`));
      });
      if (d) root.appendChild(svg("path", { d, class: cls }));
    }
    for (const point of points) root.appendChild(point);
    minutes.forEach((m, i) => {
      if (i % 10 === 0 || i === minutes.length - 1) {
        const last = i === minutes.length - 1;
        root.appendChild(svg("text", { x: last ? W - R : x(i), y: H - 6, "text-anchor": last ? "end" : "middle" }, fmtTime(m.t, false)));
      }
    });
    return root;
  }

  function stagesChart(latency) {
    const stages = Object.keys(STAGE_NAMES).filter((s) => latency.stages[s]);
    const W = 420, rowH = 34, T = 6, L = 100, R = 64, H = T + stages.length * rowH + 18;
    const all = stages.flatMap((s) => ["p50", "p95", "p99"].map((q) => latency.stages[s][q])).filter((v) => v !== null);
    if (!all.length) return noData(W, 120, "no latencies yet");
    // log scale: stages differ by orders of magnitude (assembly in µs, end to end in tens of ms)
    const lo = 0.01, hi = niceMax(Math.max(...all));
    const scale = (v) => (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo));
    const plotW = W - L - R;
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "latency percentiles by stage" });
    const ticks = Object.keys(TICK_LABELS).map(Number).sort((a, b) => a - b).filter((t) => t <= hi);
    const every = ticks.length > 6 ? 2 : 1;
    ticks.forEach((tick, i) => {
      const x = L + scale(tick) * plotW;
      root.appendChild(svg("line", { x1: x, x2: x, y1: T, y2: H - 16, class: "gridline" }));
      if (i % every === 0) root.appendChild(svg("text", { x, y: H - 4, "text-anchor": "middle" }, TICK_LABELS[tick]));
    });
    stages.forEach((s, i) => {
      const st = latency.stages[s];
      const y0 = T + i * rowH;
      root.appendChild(svg("text", { x: L - 8, y: y0 + 15, "text-anchor": "end", class: "label-strong" }, STAGE_NAMES[s]));
      ["p50", "p95", "p99"].forEach((q, j) => {
        const v = st[q];
        if (v === null) return;
        const w = Math.max(1, scale(v) * plotW);
        root.appendChild(title(svg("rect", { x: L, y: y0 + 3 + j * 8, width: w, height: 7, rx: 1.5, class: "bar-" + q }),
          `${STAGE_NAMES[s]} ${q}: ${fmtMs(v)} (n=${st.n})`));
      });
      root.appendChild(svg("text", { x: W - R + 6, y: y0 + 15, class: "label-strong" }, st.p99 === null ? "–" : fmtMs(st.p99)));
    });
    return root;
  }

  function sizesChart(sizes) {
    const W = 420, H = 200, L = 36, R = 8, T = 10, B = 34;
    const counts = sizes.counts;
    const total = counts.reduce((a, b) => a + b, 0);
    if (!total) return noData(W, H, "no injections yet");
    const top = niceMax(Math.max(...counts));
    const labels = counts.map((_, i) => (i === 0 ? "0" : i < sizes.bounds.length ? "≤" + shortChars(sizes.bounds[i]) : ">" + shortChars(sizes.bounds[sizes.bounds.length - 1])));
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "injection sizes" });
    const plotW = W - L - R, plotH = H - T - B, step = plotW / counts.length;
    const y = (v) => T + plotH - (v / top) * plotH;
    for (const f of [0, 0.5, 1]) {
      root.appendChild(svg("line", { x1: L, x2: W - R, y1: y(top * f), y2: y(top * f), class: "gridline" }));
      root.appendChild(svg("text", { x: L - 6, y: y(top * f) + 3, "text-anchor": "end" }, fmtInt(top * f)));
    }
    counts.forEach((c, i) => {
      const x = L + i * step + 3, w = step - 6;
      if (c > 0) root.appendChild(title(svg("rect", { x, y: y(c), width: w, height: y(0) - y(c), rx: 2, class: "bar-size" }), `${labels[i]} chars: ${c}`));
      root.appendChild(svg("text", { x: x + w / 2, y: H - 18, "text-anchor": "middle" }, labels[i]));
      root.appendChild(svg("text", { x: x + w / 2, y: H - 5, "text-anchor": "middle" }, c ? fmtInt(c) : ""));
    });
    return root;
  }

  function barList(container, counts, kind, emptyText) {
    const entries = Object.entries(counts || {});
    if (!entries.length) {
      replace(container, el("div", { class: "none", text: emptyText }));
      return;
    }
    const top = Math.max(...entries.map(([, n]) => n));
    const rows = entries.map(([name, n]) => {
      const fill = el("div", { class: "fill " + (kind || "") });
      fill.style.width = Math.max(2, (n / top) * 100) + "%";
      return el("div", { class: "bar-row" }, [
        el("span", { class: "name", title: name, text: name }),
        el("div", { class: "track" }, [fill]),
        el("span", { class: "count", text: fmtInt(n) }),
      ]);
    });
    container.replaceChildren(...rows);
  }

  // ------------------------------------------------------------------ tables

  function cell(text, cls) { return el("td", cls ? { class: cls, text: String(text), title: String(text) } : { text: String(text), title: String(text) }); }

  function fillTable(table, rows, makeRow, emptyText, columns) {
    const body = table.tBodies[0];
    if (!rows.length) {
      body.replaceChildren(el("tr", { class: "placeholder" }, [el("td", { colspan: String(columns), text: emptyText })]));
      return;
    }
    body.replaceChildren(...rows.map(makeRow));
  }

  function injectionRow(r) {
    const tr = el("tr", { "data-id": r.id, "data-cid": r.correlation_id, class: r.chars === 0 ? "empty-row" : "" }, [
      cell(fmtTime(r.at)),
      cell(r.project),
      cell(r.session),
      cell(r.agent),
      cell(r.trigger),
      cell(fmtInt(r.items), "num"),
      cell(fmtInt(r.chars), "num"),
      cell(fmtInt(r.bytes), "num"),
      cell(fmtInt(r.tokens), "num"),
      cell(fmtMs(r.retrieval_ms), "num"),
      cell(fmtMs(r.assembly_ms), "num"),
      cell(fmtMs(r.e2e_ms), "num"),
      cell(r.empty_reason || "", "reason"),
    ]);
    if (!firstRender && !seen.has(r.id)) tr.classList.add("fresh");
    seen.add(r.id);
    return tr;
  }

  // ------------------------------------------------------------------ inspector

  let inspecting = null;

  function dl(pairs) {
    const list = el("dl", {});
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      list.append(el("dt", { text: k }), el("dd", { text: String(v) }));
    }
    return list;
  }

  function clipped(part) {
    return part.text + (part.omitted_chars ? ` … [+${fmtInt(part.omitted_chars)} chars]` : "");
  }

  function breakdownText(b) {
    const keys = ["similarity", "lexical", "domain", "conviction", "recency", "outcome_weight", "tier_factor",
      "kind_boost", "file_boost"];
    const parts = [];
    for (const k of keys) if (k in b) parts.push(`${k} ${Number(b[k]).toFixed(3)}`);
    if ("cosine" in b) parts.push(`cosine ${Number(b.cosine).toFixed(3)}`);
    if ("bm25" in b) parts.push(`bm25 ${Number(b.bm25).toFixed(2)}`);
    return parts.join(" · ");
  }

  function renderInspection(doc) {
    const body = [];
    const r = doc.retrieval;
    const inj = doc.injection;
    body.push(dl([["project", doc.project], ["session", doc.session]]));
    if (r) {
      const q = r.request;
      body.push(el("h3", { text: `Request · ${q.trigger} · ${q.agent_name} as ${q.agent_role}` }));
      body.push(el("pre", { "data-testid": "inspector-prompt", text: clipped(q.prompt) }));
      body.push(el("h3", { text: "How it was read" }));
      body.push(dl([
        ["profile", r.profile],
        ["task type", r.task_type ? `${r.task_type} (${Number(r.task_type_confidence).toFixed(2)})` : "–"],
        ["domain", r.domain ? `${r.domain} (${r.domain_source})` : "–"],
        ["fingerprint", r.fingerprint],
        ["candidates", r.candidates_considered],
        ["retrieval", fmtMs(r.retrieval_ms)],
        ["nothing retrieved", r.empty_reason],
        ["notices", r.notices.join("; ")],
      ]));
      body.push(el("h3", { text: `Ranked items (${r.items.length})` }));
      const rows = r.items.map((it) => el("tr", { class: it.injected === false ? "left-out" : "" }, [
        el("td", { class: "num", text: String(it.rank) }),
        el("td", { class: "num", text: Number(it.score).toFixed(3) }),
        el("td", {}, [
          el("div", { text: `${it.kind} · ${it.id}${it.injected === false ? " · left out" : ""}` }),
          el("div", { text: it.title || it.content.text }),
          el("div", { class: "parts", text: breakdownText(it.breakdown) }),
          it.collapsed_ids.length ? el("div", { class: "parts", text: `near copies left out: ${it.collapsed_ids.join(", ")}` }) : el("span", {}),
        ]),
      ]));
      const table = el("table", { "data-testid": "inspector-items" }, [
        el("thead", {}, [el("tr", {}, [el("th", { class: "num", text: "#" }), el("th", { class: "num", text: "score" }), el("th", { text: "item and why" })])]),
        el("tbody", {}, rows.length ? rows : [el("tr", { class: "placeholder" }, [el("td", { colspan: "3", text: "no items ranked" })])]),
      ]);
      body.push(table);
    } else {
      body.push(el("p", { class: "warn", text: "The retrieval event of this injection is not kept (read before the dashboard started?)." }));
    }
    if (inj) {
      body.push(el("h3", { text: `Injected context · ${fmtInt(inj.context_chars)} chars · ~${fmtInt(inj.token_estimate)} tokens${inj.truncated ? " · truncated" : ""}` }));
      if (inj.empty_reason) body.push(el("p", { class: "warn", text: `empty: ${inj.empty_reason}` }));
      body.push(el("pre", { "data-testid": "inspector-context", text: clipped(inj.context) || "(nothing)" }));
    }
    $("insp-chain").textContent = doc.correlation_id;
    $("insp-body").replaceChildren(...body);
  }

  function openInspection(cid) {
    inspecting = cid;
    $("inspector").hidden = false;
    $("insp-chain").textContent = cid;
    $("insp-body").replaceChildren(el("p", { class: "muted", text: "loading…" }));
    fetch(`/api/injection?id=${encodeURIComponent(cid)}`)
      .then((resp) => resp.json().then((doc) => ({ ok: resp.ok, doc })))
      .then(({ ok, doc }) => {
        if (inspecting !== cid) return;
        if (!ok) { $("insp-body").replaceChildren(el("p", { class: "warn", text: doc.error || "not found" })); return; }
        renderInspection(doc);
      })
      .catch((err) => { if (inspecting === cid) $("insp-body").replaceChildren(el("p", { class: "warn", text: String(err) })); });
  }

  function closeInspection() {
    inspecting = null;
    $("inspector").hidden = true;
  }

  // ------------------------------------------------------------------ render

  function renderProjects(s) {
    const select = $("project");
    const current = s.project || "";
    const names = s.projects.map((p) => p.name);
    if (current && !names.includes(current)) names.push(current);
    const wanted = ["", ...names.sort()];
    const have = Array.from(select.options).map((o) => o.value);
    if (wanted.join("\u0000") !== have.join("\u0000")) {
      const counts = Object.fromEntries(s.projects.map((p) => [p.name, p.injections]));
      select.replaceChildren(...wanted.map((name) => el("option", { value: name, text: name ? `${name} (${fmtInt(counts[name] || 0)})` : "All projects" })));
    }
    select.value = current;
  }

  function render(s) {
    renderProjects(s);
    const t = s.totals;
    const e2e = s.latency.stages.end_to_end;
    $("kpi-injections").textContent = fmtInt(t.injections);
    $("kpi-injections-sub").textContent = `${plural(t.items, "item")} · ${plural(t.tokens, "token")}`;
    $("kpi-rate").textContent = fmtInt(s.last_60s);
    $("kpi-e2e").textContent = e2e.n ? fmtMs(e2e.p50) : "–";
    $("kpi-e2e-sub").textContent = e2e.n ? `p99 ${fmtMs(e2e.p99)} · last ${fmtInt(e2e.n)} injections` : "no request times yet";
    $("kpi-empty").textContent = fmtInt(t.empty);
    $("kpi-empty-sub").textContent = t.injections ? `${((100 * t.empty) / t.injections).toFixed(1)}% of injections` : "";
    $("kpi-dead").textContent = fmtInt(t.dead_letters);
    $("kpi-dead").parentElement.classList.toggle("hot", t.dead_letters > 0);
    const deadReasons = Object.keys(s.dead_letters.by_reason);
    $("kpi-dead-sub").textContent = deadReasons.length ? deadReasons.slice(0, 2).join(", ") : "none";
    $("kpi-skipped").textContent = fmtInt(s.skipped.total);
    $("kpi-skipped").parentElement.classList.toggle("hot", s.skipped.total > 0);
    $("kpi-skipped-sub").textContent = s.skipped.total ? s.skipped.by_reason.map((r) => r.reason).slice(0, 2).join(", ") : "none";

    replace($("chart-minutes"), minutesChart(s.minutes));
    replace($("chart-e2e"), e2eChart(s.minutes));
    replace($("chart-stages"), stagesChart(s.latency));
    $("stages-note").textContent = `percentiles over the last ${fmtInt(s.latency.window)} injections (log scale)`;
    replace($("chart-sizes"), sizesChart(s.sizes));
    $("sizes-note").textContent = t.injections
      ? `average ${fmtInt(Math.round(t.chars / t.injections))} chars, ${fmtInt(Math.round(t.tokens / t.injections))} tokens; ${fmtInt(t.truncated)} truncated`
      : "";
    barList($("bars-triggers"), s.triggers, "", "no injections yet");
    barList($("bars-empty"), s.empty_reasons, "empty", "no empty injections");
    barList($("bars-dead"), s.dead_letters.by_reason, "dead", "no dead letters");

    $("recent-note").textContent = s.recent.length ? `latest ${s.recent.length}` : "";
    fillTable($("recent"), s.recent, injectionRow, "waiting for injections…", 13);
    fillTable($("empties"), s.recent_empty, (r) => el("tr", { "data-id": r.id, "data-cid": r.correlation_id }, [
      cell(fmtTime(r.at)), cell(r.project), cell(r.session), cell(r.trigger), cell(r.empty_reason || "", "reason"),
    ]), "no empty injections", 5);
    fillTable($("dead"), s.dead_letters.recent, (r) => el("tr", {}, [
      cell(fmtTime(r.at)), cell(r.reason, "error"), cell(r.error_class), cell(`${r.topic.split(".").slice(1).join(".")}:${r.partition}@${r.offset}`),
      cell(r.group), cell(r.message),
    ]), "no dead letters", 6);
    const lastByKey = {};
    for (const r of s.skipped.recent) {
      const key = r.topic + "\u0000" + r.reason;
      if (!(key in lastByKey)) lastByKey[key] = r;
    }
    fillTable($("skipped"), s.skipped.by_reason, (r) => {
      const last = lastByKey[r.topic + "\u0000" + r.reason];
      return el("tr", {}, [
        cell(r.topic), cell(r.reason, "error"), cell(fmtInt(r.count), "num"),
        cell(last ? `${fmtTime(last.at)} (partition ${last.partition}, offset ${last.offset})` : "–"), cell(last ? last.detail : ""),
      ]);
    }, "every message decoded", 5);

    renderFeed(s);
    firstRender = false;
  }

  function renderFeed(s) {
    const f = s.feed || {};
    const parts = [
      el("span", { text: `broker ${f.bootstrap_servers || "?"}` }),
      el("span", { text: `group ${f.group_id || "?"}` }),
      el("span", { text: `${fmtInt(f.partitions)} partitions` }),
      el("span", { text: `${fmtInt(f.consumed)} messages read` }),
      el("span", { text: `lag ${Object.entries(f.lag || {}).map(([k, v]) => `${k.split(".").slice(1).join(".")} ${v}`).join(", ") || "0"}` }),
      el("span", { text: `${fmtInt(s.clients)} viewers` }),
      el("span", { text: `snapshot ${s.build_ms} ms · ${fmtTime(s.generated_at)}` }),
    ];
    if (f.error) parts.push(el("span", { class: "bad", text: `feed error: ${f.error}` }));
    if (s.projects_dropped) parts.push(el("span", { text: `${fmtInt(s.projects_dropped)} idle projects dropped` }));
    $("feed").replaceChildren(...parts);
  }

  // ------------------------------------------------------------------ transport

  function setLive(on, text) {
    const live = $("live");
    live.className = "live " + (on ? "on" : "off");
    live.textContent = text;
  }

  function query() {
    const project = $("project").value;
    return project ? "?project=" + encodeURIComponent(project) : "";
  }

  function connect() {
    if (source) source.close();
    if (pollTimer) clearTimeout(pollTimer);
    seen.clear();
    firstRender = true;
    if (!window.EventSource) {
      poll();
      return;
    }
    source = new EventSource("/api/events" + query());
    source.addEventListener("snapshot", (e) => {
      setLive(true, "live");
      render(JSON.parse(e.data));
    });
    source.onerror = () => setLive(false, "reconnecting…");
  }

  function poll() {
    fetch("/api/snapshot" + query(), { cache: "no-store" })
      .then((r) => r.json())
      .then((s) => { setLive(true, "live (polling)"); render(s); })
      .catch(() => setLive(false, "reconnecting…"))
      .finally(() => { pollTimer = setTimeout(poll, 1000); });
  }

  function start() {
    const params = new URLSearchParams(window.location.search);
    const project = params.get("project") || "";
    if (project) $("project").replaceChildren(el("option", { value: "", text: "All projects" }), el("option", { value: project, text: project }));
    $("project").value = project;
    for (const id of ["recent", "empties"]) {
      $(id).addEventListener("click", (e) => {
        const row = e.target.closest("tr[data-cid]");
        if (row) openInspection(row.getAttribute("data-cid"));
      });
    }
    $("insp-close").addEventListener("click", closeInspection);
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeInspection(); });
    $("project").addEventListener("change", () => {
      const p = $("project").value;
      const url = new URL(window.location.href);
      if (p) url.searchParams.set("project", p); else url.searchParams.delete("project");
      window.history.replaceState(null, "", url);
      connect();
    });
    connect();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
