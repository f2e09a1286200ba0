// The table's screens: one Server-Sent Events stream from the daemon, drawn into the page.
// Read-only: the page only listens. It reconnects by itself; a silent link (no status for
// WATCHDOG_MS: the daemon re-sends it every 5000 ms) is closed and opened again.
//
// Words: every word on the page comes from the catalogue in the feed's `state` message
// (controller/display/words.py), in the page's language: `?lang=` or the table's
// `display.language`. A key the language lacks shows as ⟦key⟧ and is listed in
// window.missingWords (the tests fail on it): never an English word on a Japanese screen.
"use strict";

const WATCHDOG_MS = 15000;
const SUITS = {S: "\u2660", H: "\u2665", D: "\u2666", C: "\u2663"};
const RED = {H: true, D: true};
const ROUND_TARGETS = ["burn", "P1", "P2", "P3", "P4", "P5", "banker",
                       "P1", "P2", "P3", "P4", "P5", "banker"];
// a round's hands in the last results, in the felt's order
const CHIP_SEATS = ["P1", "P2", "P3", "P4", "P5", "banker"];
const DESIGN = {landscape: [1920, 1080], portrait: [1080, 1920]};
// The countdown eases onto a resynced deadline: at most this share of a frame's time is added
// or taken per frame, so the seconds never run backwards; beyond SNAP_S it simply jumps.
const SLEW = 0.25;
const SNAP_S = 2;

let source = null;
let lastMessage = 0;
let countdown = null;   // {deadline, target: ms on performance.now(), seconds, rate, frozen, left}
let lastFrame = 0;
let results = [];
let status = null;
let roadmap = null;
let catalogue = null;   // {lang: {key: words}}
let tableLanguage = "en";
let rtlLanguages = ["fa"];
let lang = "en";
// the scoreboard and the overlay (players.mjs): their own feed, story and results
const PLAYERS = document.body.classList.contains("players-page");
window.missingWords = [];
window.statusCount = 0;

function $(id) { return document.getElementById(id); }

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

// The words for `key` in the page's language, placeholders filled.
function T(key, args) {
  const words = catalogue && catalogue[lang];
  let text = words ? words[key] : undefined;
  if (text === undefined) {
    if (catalogue && !window.missingWords.includes(lang + ":" + key)) {
      window.missingWords.push(lang + ":" + key);
    }
    return "\u27e6" + key + "\u27e7";
  }
  return text.replace(/\{(\w+)\}/g, (m, name) =>
    args && args[name] !== undefined && args[name] !== null ? String(args[name]) : m);
}

function seatWords(seat) {
  if (/^P\d$/.test(seat)) return T("seat.P", {n: seat.slice(1)});
  return T("seat." + seat);
}

function seatShort(seat) {
  if (/^P\d$/.test(seat)) return T("seat.short.P", {n: seat.slice(1)});
  return T("seat.short." + seat);
}

// A seat's name wider than its box ("Manlalaro 1" in a portrait seat or beside a plate's
// counts) takes the catalogue's short word (M1), never a smaller or a cut name.
function shortenIfWide(node, seat, box) {
  const room = box || node;
  if (/^(P\d|banker)$/.test(seat) && room.scrollWidth > room.clientWidth + 1) {
    node.textContent = seatShort(seat);
  }
}

// Each plate's name beside its counts, whole or short: measured once the plates are shown
// (a pause hides them), so tried on every status until it was.
function fitPlateNames() {
  document.querySelectorAll("#roadmap .plate:not([data-fitted])").forEach((plate) => {
    const head = plate.querySelector(".plate-head");
    if (head.clientWidth === 0) return;
    plate.dataset.fitted = "1";
    shortenIfWide(head.firstChild, "P" + plate.dataset.position, head);
  });
}

// A {key, args} message (the dealer's next step): seats and "which card" translated too.
function message(msg) {
  if (!msg || !msg.key) return "";
  const args = Object.assign({}, msg.args || {});
  if (typeof args.seat === "string") args.seat = seatWords(args.seat);
  if (args.which === "first" || args.which === "second") args.which = T("card." + args.which);
  return T(msg.key, args);
}

function chooseLanguage() {
  const asked = new URLSearchParams(window.location.search).get("lang");
  const known = catalogue ? Object.keys(catalogue) : [];
  lang = known.includes(asked) ? asked : (known.includes(tableLanguage) ? tableLanguage : "en");
  // a catalogue's code (zh_Hant, pt_BR) as the language tag the browser reads (zh-Hant): it
  // picks the glyphs (Han differs by language) and the :lang() styles by it
  document.documentElement.lang = lang.replace(/_/g, "-");
  document.documentElement.dir = rtlLanguages.includes(lang) ? "rtl" : "ltr";
  document.querySelectorAll("[data-word]").forEach((node) => {
    node.textContent = T(node.dataset.word);
  });
}

// The page is laid out for a 1920x1080 (or, on a portrait monitor, 1080x1920) screen and
// scaled to the window: the same share of the screen on every monitor.
function fit() {
  const portrait = window.innerHeight > window.innerWidth;
  const [w, h] = DESIGN[portrait ? "portrait" : "landscape"];
  const scale = Math.min(window.innerWidth / w, window.innerHeight / h);
  document.body.classList.toggle("portrait", portrait);
  const left = (window.innerWidth - w * scale) / 2;
  const top = (window.innerHeight - h * scale) / 2;
  document.body.style.transform = `translate(${left}px, ${top}px) scale(${scale})`;
  document.body.dataset.scale = String(scale);
}

function comboWords(hand) {
  return hand.combo ? T("combo." + hand.combo) : "";
}

function valueText(hand) {
  const value = Number(hand.value);
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

function valueWords(hand) {
  const shown = valueText(hand);
  return shown === "1" ? T("points.one") : T("points", {v: shown});
}

function oddsWords(odds, key) {
  if (!odds) return "";
  const [a, b] = String(odds).split(":");
  return T(key || "odds", {a: a, b: b});
}

// The odds in a result chip: the catalogue's short form ("2:1", as the Persian sheet's table
// writes it too), where "2 به 1" is wider than the chip.
function oddsShort(odds) { return oddsWords(odds, "odds.short"); }

// A card face drawn with CSS: the rank and the suit symbol, red or black.
function cardFace(code) {
  const rank = code[0] === "T" ? "10" : code[0];
  const suit = code[1];
  const card = el("div", "card" + (RED[suit] ? " red" : ""));
  card.appendChild(el("span", "rank", rank));
  card.appendChild(el("span", "suit", SUITS[suit] || suit));
  return card;
}

function cardBack() { return el("div", "card back"); }

// One seat of the layout: its name, cards (faces once revealed, backs while dealt face down),
// value, combination and outcome with its odds.
function drawSeat(node, name, hand, facedown, result, next) {
  node.replaceChildren();
  node.classList.toggle("next", next);
  node.classList.remove("win", "lose", "tie");
  node.appendChild(el("div", "seat-name", seatWords(name)));
  const cards = el("div", "cards");
  if (hand && hand.cards) {
    hand.cards.forEach((code) => cards.appendChild(cardFace(code)));
  } else {
    for (let i = 0; i < facedown; i++) cards.appendChild(cardBack());
  }
  const row = el("div", "hand-row");
  row.appendChild(cards);
  node.appendChild(row);
  if (hand && hand.cards) {
    const value = el("div", "hand-value", valueText(hand));
    value.title = valueWords(hand);
    row.appendChild(value);
    const combo = comboWords(hand);
    if (combo) node.appendChild(el("div", "combo", combo));
  }
  if (result && result.outcome) {
    node.classList.add(result.outcome);
    const badge = el("div", "outcome " + result.outcome);
    badge.appendChild(el("span", "outcome-word", T("outcome." + result.outcome)));
    if (result.outcome !== "tie" && result.odds) {
      badge.appendChild(el("span", "outcome-odds", oddsWords(result.odds)));
    }
    if (result.pair_won) badge.appendChild(el("span", "pair-won", T("pair_won")));
    node.appendChild(badge);
  }
  if (next) node.appendChild(el("div", "next-tag", T("next_card")));
}

function drawLayout(view) {
  const felt = $("felt");
  if (!felt) return;
  const dealt = {};
  // The last round's hands stay up until the next round's first card comes out.
  const inRound = ["betting", "dealing", "revealing"].includes(view.state)
    && (view.state !== "betting" || view.cards_dealt > 0);
  if (inRound) {
    for (let i = 0; i < view.cards_dealt && i < ROUND_TARGETS.length; i++) {
      const seat = ROUND_TARGETS[i];
      dealt[seat] = (dealt[seat] || 0) + 1;
    }
  }
  // Hands: the open round's, once its betting closed; before its first card the last result.
  let hands = inRound ? (view.hands || {}) : {};
  const outcome = {};
  const last = results.find((res) => !res.cancelled);
  felt.dataset.shownRound = "";
  if (!inRound && last) {
    hands = {};
    last.seats.forEach((seat) => { hands[seat.seat] = seat; outcome[seat.seat] = seat; });
    felt.dataset.shownRound = String(last.round);
  }
  felt.querySelectorAll(".seat").forEach((node) => {
    const name = node.dataset.seat;
    drawSeat(node, name, hands[name], dealt[name] || 0, outcome[name], view.target === name);
  });
  // measured once all seats are drawn: one layout for the felt
  felt.querySelectorAll(".seat").forEach((node) => {
    shortenIfWide(node.querySelector(".seat-name"), node.dataset.seat);
  });
}

function drawBanner(view) {
  const banner = $("banner");
  if (!banner) return;
  const b = view.banner;
  banner.hidden = !b;
  if (!b) return;
  $("banner-title").textContent = T("banner.paused");
  $("banner-what").textContent = T("fault." + (b.fault || "fault"));
  $("banner-by").textContent = b.by_words ? T("banner.by", {who: message(b.by_words)}) : "";
  $("banner-code").textContent = b.code + (b.detail_code ? " / " + b.detail_code : "")
    + (b.held_inputs ? " \u00b7 " + T("banner.held", {n: b.held_inputs}) : "");
  if ($("banner-way")) {
    $("banner-way-label").textContent = T("banner.way_out");
    $("banner-way").textContent = T("way." + (b.fault || "fault"));
  }
}

function drawHealth(view) {
  const list = $("health");
  if (!list) return;
  list.replaceChildren();
  (view.health || []).forEach((row) => {
    const item = el("li", row.ok ? "ok" : "bad");
    item.dataset.part = row.name;
    item.appendChild(el("span", "part", T("part." + (row.part || row.name), {name: row.name})));
    item.appendChild(el("span", "part-state", T(row.key, row.args)
      + (row.backlog ? " \u00b7 " + T("health.to_send", {n: row.backlog}) : "")));
    list.appendChild(item);
  });
}

function drawHeader(view) {
  $("table").textContent = T("table", {id: view.table || ""});
  $("shoe").textContent = view.shoe ? T("shoe", {n: view.shoe}) : T("no_shoe");
  const last = results.find((res) => !res.cancelled);
  $("round").textContent = view.round ? T("round", {n: view.round})
    : (last && last.shoe === view.shoe ? T("round_settled", {n: last.round}) : "");
  if ($("cards-left")) {
    $("cards-left").textContent = view.cards_left !== null && view.cards_left !== undefined
      && view.shoe ? T("cards_left", {n: view.cards_left}) : "";
  }
  $("last-round").hidden = !view.last_round;
  const paused = !!(view.banner || view.paused);  // the players' status says only "paused"
  $("title").textContent = paused ? T("state.paused") : T("state." + view.state);
  document.body.classList.toggle("paused", paused);
  document.body.dataset.state = view.state;
}

function drawStatus(view) {
  status = view;
  window.statusCount += 1;
  document.body.dataset.link = "live";
  drawHeader(view);
  fitPlateNames();
  drawBanner(view);
  drawHealth(view);
  if ($("step")) $("step").textContent = message(view.step_words);
  const bet = view.betting || {};
  if (bet.open && bet.seconds_left !== null && bet.seconds_left !== undefined) {
    const rate = bet.rate > 0 ? bet.rate : 1;
    const target = performance.now() + bet.seconds_left * rate * 1000;
    const keep = countdown && !countdown.frozen && !bet.frozen && countdown.round === view.round
      && Math.abs(target - countdown.deadline) < SNAP_S * rate * 1000;
    countdown = {seconds: bet.seconds || 15, frozen: !!bet.frozen, left: bet.seconds_left,
                 deadline: keep ? countdown.deadline : target, target: target, rate: rate,
                 round: view.round};
  } else {
    countdown = null;
  }
  drawLayout(view);
  if (PLAYERS) drawPlayersStatus(view);
  tick();
}

// The ring and the seconds, every frame, from the deadline (eased onto a resynced one).
function tick() {
  const ring = $("ring");
  if (!ring) return;
  const now = performance.now();
  const frameMs = lastFrame ? Math.min(100, now - lastFrame) : 0;
  lastFrame = now;
  let left = 0;
  let label = "clock.closed";
  if (countdown) {
    if (countdown.frozen) {
      left = countdown.left;
    } else {
      const gap = countdown.target - countdown.deadline;
      const most = SLEW * frameMs;
      countdown.deadline += Math.max(-most, Math.min(most, gap));
      left = Math.max(0, (countdown.deadline - now) / 1000 / countdown.rate);
    }
    label = countdown.frozen ? "clock.frozen" : "clock.open";
  } else if (status && ["no_shoe", "awaiting_flip", "burning", "ready"].includes(status.state)) {
    label = "clock.none";
  }
  const share = countdown ? Math.min(1, left / countdown.seconds) : 0;
  ring.setAttribute("stroke-dashoffset", (1000 * (1 - share)).toFixed(1));
  ring.style.opacity = share > 0 ? "1" : "0";
  ring.classList.toggle("hurry", !!countdown && left <= 5);
  $("seconds").textContent = countdown ? String(Math.ceil(left)) : "";
  $("seconds").dataset.left = countdown ? left.toFixed(3) : "";
  if (catalogue && $("seconds-label")) $("seconds-label").textContent = T(label);
}

const SVG = "http://www.w3.org/2000/svg";
const CELL = 40;
const ROWS = 6;
const BEAD_LETTER_WIDTH = 24;  // of a bead of radius 17: a letter's ink keeps inside it

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, String(v)));
  if (text !== undefined) node.textContent = text;
  return node;
}

// The bead plates, one per Player position (the same beads as roadmap_svg.py and
// /roadmap.svg, drawn here so each page has its language and its room): a column of six
// top to bottom, then the next column to the right, in every language.
function drawRoadmap() {
  if (PLAYERS) drawStats();
  const box = $("roadmap");
  if (!box || !roadmap || !catalogue) return;
  box.replaceChildren();
  const beads = roadmap.beads || {};
  const colours = roadmap.colours || {};
  // a cancelled round keeps its place on every plate, marked as cancelled
  const cancelled = (roadmap.cancelled || []).map((round) => ({round: round, outcome: "cancelled"}));
  const plates = {};
  for (let p = 1; p <= 5; p++) {
    plates["P" + p] = (beads["P" + p] || []).concat(cancelled).sort((a, b) => a.round - b.round);
  }
  const most = Math.max(0, ...Object.values(plates).map((list) => list.length));
  const columns = Math.max(6, Math.ceil(most / ROWS));
  for (let p = 1; p <= 5; p++) {
    const plate = el("div", "plate");
    plate.dataset.position = String(p);
    const head = el("div", "plate-head");
    head.appendChild(el("span", "plate-name", seatWords("P" + p)));
    const counts = (roadmap.counts || {})["P" + p] || {};
    const tally = el("span", "plate-counts");
    [["win", counts.wins], ["lose", counts.losses], ["tie", counts.ties]].forEach(([kind, n]) => {
      const c = el("span", "count count-" + kind, String(n || 0));
      c.title = T("legend." + kind);
      tally.appendChild(c);
    });
    head.appendChild(tally);
    plate.appendChild(head);
    const svg = svgEl("svg", {viewBox: `0 0 ${columns * CELL} ${ROWS * CELL}`, class: "plate-grid"});
    const grid = [];
    for (let c = 0; c <= columns; c++) grid.push(`M${c * CELL} 0V${ROWS * CELL}`);
    for (let r = 0; r <= ROWS; r++) grid.push(`M0 ${r * CELL}H${columns * CELL}`);
    svg.appendChild(svgEl("path", {d: grid.join(""), class: "plate-lines", fill: "none"}));
    plates["P" + p].forEach((bead, index) => {
      const cx = Math.floor(index / ROWS) * CELL + CELL / 2;
      const cy = (index % ROWS) * CELL + CELL / 2;
      if (bead.outcome === "cancelled") {
        const g = svgEl("g", {class: "bead cancelled", "data-round": bead.round,
                              "data-position": p, "data-outcome": "cancelled"});
        g.appendChild(svgEl("circle", {class: "bead-body", cx: cx, cy: cy, r: 16, fill: "none",
                                       stroke: "#9aa59f", "stroke-width": 3}));
        g.appendChild(svgEl("text", {class: "bead-text", x: cx, y: cy, "font-size": 24,
                                     "text-anchor": "middle", "dominant-baseline": "central"},
                            "\u00d7"));
        svg.appendChild(g);
        return;
      }
      const g = svgEl("g", {class: "bead", "data-round": bead.round, "data-position": p,
                            "data-outcome": bead.outcome, "data-flush": String(!!bead.flush),
                            "data-pair": String(!!bead.pair)});
      g.appendChild(svgEl("circle", {class: "bead-body", cx: cx, cy: cy, r: 17,
                                     fill: colours[bead.outcome] || "#888"}));
      g.appendChild(svgEl("text", {class: "bead-text", x: cx, y: cy, "font-size": 24,
                                   "text-anchor": "middle", "dominant-baseline": "central"},
                          T("bead." + bead.outcome)));
      if (bead.flush) {
        g.appendChild(svgEl("circle", {class: "flush-ring", cx: cx, cy: cy, r: 19.5,
                                       fill: "none", stroke: "#ffffff", "stroke-width": 2.5}));
      }
      if (bead.pair) {
        g.appendChild(svgEl("circle", {class: "pair-dot", cx: cx + 12, cy: cy + 12, r: 6,
                                       fill: "#ffc400", stroke: "#9a7400", "stroke-width": 1.2}));
      }
      svg.appendChild(g);
    });
    plate.appendChild(svg);
    box.appendChild(plate);
    // A letter wider than its bead (W, 勝) is drawn narrower, never smaller: its 28 px height
    // is what a player reads from 2 m (docs/display.md), its ink stays inside the bead.
    svg.querySelectorAll(".bead-text").forEach((t) => {
      if (t.getComputedTextLength() > BEAD_LETTER_WIDTH) {
        t.setAttribute("textLength", BEAD_LETTER_WIDTH);
        t.setAttribute("lengthAdjust", "spacingAndGlyphs");
      }
    });
  }
  fitPlateNames();
  const legend = $("legend");
  if (legend) {
    legend.replaceChildren();
    ["win", "lose", "tie", "flush", "pair"].forEach((kind) => {
      const item = el("span", "legend-item legend-" + kind);
      item.appendChild(el("span", "legend-mark"));
      item.appendChild(el("span", "legend-words", T("legend." + kind)));
      legend.appendChild(item);
    });
  }
}

// The hands' short names over the last results' columns (P1…P5, B).
function chipNames(seats) {
  const names = el("span", "chips");
  seats.forEach((seat) => names.appendChild(el("span", "chip chip-label", seatShort(seat))));
  return names;
}

// One hand of a round in the last results: its value and its odds (`odds` writes them) or
// the tie's letter, coloured by outcome, a dot for a won Pair bet (as on the plates).
function resultChip(seat, odds) {
  const chip = el("span", "chip " + (seat.outcome || "banker"));
  chip.dataset.seat = seat.seat;
  chip.appendChild(el("span", "chip-value", valueText(seat)));
  if (seat.outcome === "tie") chip.appendChild(el("span", "chip-odds", T("bead.tie")));
  else if (seat.outcome) chip.appendChild(el("span", "chip-odds", odds(seat.odds)));
  if (seat.pair_won) chip.appendChild(el("span", "chip-pair"));
  return chip;
}

function drawResults(list) {
  results = list || [];
  const box = $("results");
  if (PLAYERS) {
    drawPlayersResults();
  } else if (box && catalogue) {
    box.replaceChildren();
    // the hands' names once, over their columns: each chip has the room for its odds
    const head = el("li", "results-head");
    head.appendChild(el("span", "result-round"));
    head.appendChild(chipNames(CHIP_SEATS));
    box.appendChild(head);
    const keep = Number(box.dataset.keep || results.length);
    results.slice(0, keep).forEach((res) => {
      const item = el("li", "result" + (res.cancelled ? " cancelled" : ""));
      item.dataset.round = res.round;
      item.appendChild(el("span", "result-round", "#" + res.round));
      if (res.cancelled) item.appendChild(el("span", "result-cancelled", T("result.cancelled")));
      const chips = el("span", "chips");
      (res.seats || []).forEach((seat) => chips.appendChild(resultChip(seat, oddsShort)));
      if (!res.cancelled) item.appendChild(chips);
      box.appendChild(item);
    });
  }
  if (status) drawLayout(status);
  if (PLAYERS && status) drawPlayersStatus(status);  // the stage shows the newest result
}

function linkWords(key) {
  $("link").textContent = catalogue ? T(key) : "";
}

function connect() {
  if (source) source.close();
  source = new EventSource(document.body.dataset.feed || "/events");
  lastMessage = performance.now();
  source.addEventListener("state", (e) => {
    const state = JSON.parse(e.data);
    lastMessage = performance.now();
    if (state.words) {
      catalogue = state.words;
      tableLanguage = state.language || "en";
      if (state.languages && state.languages.rtl) rtlLanguages = state.languages.rtl;
      chooseLanguage();
    }
    if (PLAYERS) applyStudio(state.studio);
    if (state.roadmap) roadmap = state.roadmap;
    drawRoadmap();
    if (state.results) drawResults(state.results);
    if (state.status) drawStatus(state.status);
    linkWords("link.live");
  });
  source.addEventListener("status", (e) => { lastMessage = performance.now(); drawStatus(JSON.parse(e.data)); });
  source.addEventListener("results", (e) => { lastMessage = performance.now(); drawResults(JSON.parse(e.data)); });
  source.addEventListener("roadmap", (e) => {
    lastMessage = performance.now();
    roadmap = JSON.parse(e.data);
    drawRoadmap();
  });
  source.onopen = () => { linkWords("link.live"); };
  source.onerror = () => {
    document.body.dataset.link = "lost";
    linkWords("link.lost");
  };
}

function watchdog() {
  if (performance.now() - lastMessage > WATCHDOG_MS) {
    document.body.dataset.link = "lost";
    linkWords("link.silent");
    connect();
  }
}

function frame() {
  tick();
  if (PLAYERS) keepResultsWhole();
  watchdog();
  window.requestAnimationFrame(frame);
}

fit();
window.addEventListener("resize", () => { fit(); if (catalogue) drawResults(results); });
connect();
window.requestAnimationFrame(frame);
// A hidden page gets no frames: the watchdog still runs.
setInterval(() => { if (document.hidden) watchdog(); }, 1000);
