// The players' pages (the scoreboard and the stream overlay): the round's story told to
// players from the players' feed (/players/events): betting open with its call and countdown,
// no more bets, the reveal, the winners (Pok 8 and 9 lit), a pause or a cancel in words that
// say what it means for the bets, the shuffle between shoes, the limits and the paytable.
//
// Loaded before display.mjs, which owns the feed, the words (T) and the shared drawing; these
// functions are called from there once a message is in. Every word comes from the catalogue.
"use strict";

const SHUFFLING_STATES = ["no_shoe", "awaiting_flip", "burning"];
const HANDS = ["P1", "P2", "P3", "P4", "P5", "banker"];
// the stats rows: the roadmap's count, the words that name it, and whether it is a share
const STAT_ROWS = [["wins", "outcome.win", true], ["losses", "outcome.lose", true],
                   ["ties", "outcome.tie", true], ["flushes", "stats.flushes", false],
                   ["pairs", "stats.pairs", false]];
const POK = 8;  // a two-card 8 or 9: the winner moment

function isPlayersPage() { return document.body.classList.contains("players-page"); }

function isOverlay() { return document.body.classList.contains("overlay"); }

// Where the round is, as the players' story tells it: the shoe's last result stays up a while
// before the shuffle (result_held), as any other result does before the next call.
function phaseOf(view) {
  if (view.result_held) return "result";
  if (SHUFFLING_STATES.includes(view.state)) return "shuffling";
  if (view.betting && view.betting.open) return "betting";
  if (view.state === "dealing" || view.state === "revealing") return "closed";
  return "result";
}

// The studio's colours (display.studio.colours) on the page's own properties.
function applyStudio(studio) {
  window.studio = studio || null;
  if (!studio || !studio.colours) return;
  Object.entries(studio.colours).forEach(([name, colour]) => {
    document.documentElement.style.setProperty("--" + name, colour);
  });
}

function amount(n) { return Number(n).toLocaleString("en-US"); }  // 50,000: as the sheets

function drawPlayersStatus(view) {
  const phase = phaseOf(view);
  document.body.dataset.phase = phase;
  drawPlayersHeader(view);
  $("game").textContent = view.game ? T("game_id", {id: view.game}) : "";
  const notice = view.notice;
  $("notice").hidden = !notice;
  $("notice").dataset.kind = notice ? notice.kind : "";
  document.body.classList.toggle("cancelled", !!notice && notice.kind === "cancelled");
  $("notice-words").textContent = notice ? T(notice.key, notice.args) : "";
  $("call").textContent = view.call ? T(view.call) : "";
  $("call").dataset.call = view.call || "";
  drawStage(view);
}

// The header as players read it: a table name too long for its room is cut with an ellipsis
// (the whole name in its title); after a cancel, the cancelled round, not the last settled.
function drawPlayersHeader(view) {
  $("table").title = $("table").textContent;
  const newest = results[0];
  if (!view.round && newest && newest.cancelled && newest.shoe === view.shoe) {
    $("round").textContent = T("round_cancelled", {n: newest.round});
  }
}

// The stage: the shuffle between shoes, the limits and paytable while bets are taken, the
// round's hands as they are revealed, then its result with the winners lit.
function drawStage(view) {
  const stage = $("stage");
  if (!stage || !catalogue) return;
  const phase = phaseOf(view);
  stage.replaceChildren();
  stage.dataset.show = phase;
  if (phase === "shuffling") {
    stage.appendChild(el("div", "shuffle-title", T("shuffling")));
    stage.appendChild(el("div", "shuffle-detail", T("shuffling.detail")));
    return;
  }
  if (phase === "betting") {
    drawLimits(stage);
    // what the room holds: the paytable's note first, then the limits give way to it
    for (const extra of [".pay-note", ".limits"]) {
      if (stage.scrollHeight <= stage.clientHeight + 1) break;
      const node = stage.querySelector(extra);
      if (node) node.remove();
    }
    return;
  }
  if (phase === "closed") {
    const seats = HANDS.map((seat) => Object.assign({seat: seat}, (view.hands || {})[seat] || {}));
    drawHands(stage, view.round, seats);
    return;
  }
  const last = results[0];
  if (!last) return;
  if (last.cancelled) {
    stage.dataset.show = "cancelled";
    stage.appendChild(el("div", "stage-title", T("result.latest", {n: last.round})));
    stage.appendChild(el("div", "cancelled-words", T("result.cancelled")));
    return;
  }
  drawHands(stage, last.round, last.seats);
}

function drawHands(stage, round, seats) {
  stage.appendChild(el("div", "stage-title", round ? T("result.latest", {n: round}) : ""));
  const list = el("div", "hands");
  seats.forEach((hand) => {
    const line = el("div", "hand-line " + (hand.outcome || (hand.seat === "banker"
      ? "banker" : "waiting")));
    line.dataset.seat = hand.seat;
    const head = el("div", "hand-head");
    const foot = el("div", "hand-foot");
    head.appendChild(el("span", "hand-seat", seatWords(hand.seat)));
    if (hand.cards) {
      const cards = el("span", "mini-cards");
      hand.cards.forEach((code) => cards.appendChild(miniCard(code)));
      head.appendChild(cards);
      head.appendChild(el("span", "hand-points", valueText(hand)));
      if (Number(hand.value) >= POK && (hand.seat === "banker" || hand.outcome === "win")) {
        line.classList.add("pok");
        foot.appendChild(el("span", "pok-badge", T("winner.pok", {v: valueText(hand)})));
      }
    }
    line.appendChild(head);
    if (hand.outcome) {
      const badge = el("span", "hand-outcome " + hand.outcome, T("outcome." + hand.outcome));
      foot.appendChild(badge);
      if (hand.outcome !== "tie" && hand.odds) foot.appendChild(el("span", "hand-odds",
                                                                   oddsWords(hand.odds)));
      if (hand.pair_won) foot.appendChild(el("span", "pair-won", T("pair_won")));
    }
    if (hand.combo) foot.appendChild(el("span", "hand-combo", comboWords(hand)));
    if (foot.childNodes.length) line.appendChild(foot);
    list.appendChild(line);
  });
  stage.appendChild(list);
}

function miniCard(code) {
  const card = el("span", "mini-card" + (RED[code[1]] ? " red" : ""));
  card.textContent = (code[0] === "T" ? "10" : code[0]) + (SUITS[code[1]] || code[1]);
  return card;
}

function drawLimits(stage) {
  const studio = window.studio || {};
  const limits = studio.limits || {};
  const currency = studio.currency ? " " + studio.currency : "";
  const names = Object.keys(limits);
  if (names.length) {
    const box = el("div", "limits");
    box.appendChild(el("div", "stage-title", T("limits.title")));
    names.forEach((name) => {
      const row = el("div", "pay-row");
      row.appendChild(el("span", "pay-words", T("limits." + name)));
      row.appendChild(el("span", "pay-odds",
                         amount(limits[name].min) + "–" + amount(limits[name].max) + currency));
      box.appendChild(row);
    });
    stage.appendChild(box);
  }
  const table = el("div", "paytable");
  table.appendChild(el("div", "stage-title", T("paytable.title")));
  (studio.paytable || []).forEach((entry) => {
    const row = el("div", "pay-row");
    row.dataset.key = entry.key;
    row.appendChild(el("span", "pay-words", T(entry.key)));
    if (entry.odds) row.appendChild(el("span", "pay-odds", oddsWords(entry.odds)));
    table.appendChild(row);
  });
  table.appendChild(el("div", "pay-note", T("pay.pattern")));
  stage.appendChild(table);
}

// Statistics with labels (a grid of divs, not a table: "td" and "th" spell cards to the
// sealing tests' search of the page): each Player position's wins, losses and ties with their share of
// the settled rounds, and its flushes and pairs; the rounds, cancelled ones counted too.
function drawStats() {
  const table = $("stats");
  if (!table || !roadmap || !catalogue) return;
  table.replaceChildren();
  const settled = roadmap.rounds || 0;
  const cancelled = (roadmap.cancelled || []).length;
  const rounds = settled + cancelled;
  const total = T(rounds === 1 ? "stats.rounds.one" : "stats.rounds", {n: rounds})
    + (cancelled ? " \u00b7 " + T("stats.cancelled", {n: cancelled}) : "");
  if ($("rounds-count")) $("rounds-count").textContent = total;
  if (isOverlay()) {
    drawStatsByPosition(table, settled);
    return;
  }
  const head = el("div", "stats-line stats-head");
  head.appendChild(el("div", "stats-title", T("stats.title")));
  for (let p = 1; p <= 5; p++) head.appendChild(el("div", "stats-seat", seatShort("P" + p)));
  table.appendChild(head);
  STAT_ROWS.forEach(([count, key, isShare]) => {
    const row = el("div", "stats-line stats-row stats-" + count);
    const label = el("div", "stats-label");
    label.appendChild(el("span", "legend-mark"));
    label.appendChild(el("span", "stats-words", T(key)));
    row.appendChild(label);
    for (let p = 1; p <= 5; p++) {
      const counts = (roadmap.counts || {})["P" + p] || {};
      const cell = el("div", "stats-cell", String(counts[count] || 0));
      if (isShare) cell.appendChild(el("span", "stats-share", shares(counts, settled)[count]));
      row.appendChild(cell);
    }
    table.appendChild(row);
  });
}

// A position's wins, losses and ties as whole percentages that add up to 100 (rounded one by
// one, 1, 4 and 1 of 6 would read 17 + 67 + 17 = 101): the largest remainders take the rest.
function shares(counts, settled) {
  const kinds = STAT_ROWS.filter(([, , isShare]) => isShare).map(([count]) => count);
  if (!settled) return Object.fromEntries(kinds.map((kind) => [kind, "\u2013"]));
  const exact = kinds.map((kind) => 100 * (counts[kind] || 0) / settled);
  const whole = exact.map(Math.floor);
  let rest = 100 - whole.reduce((a, b) => a + b, 0);
  kinds.map((kind, i) => i).sort((a, b) => (exact[b] - whole[b]) - (exact[a] - whole[a]))
    .forEach((i) => { if (rest > 0 && exact[i] > whole[i]) { whole[i] += 1; rest -= 1; } });
  return Object.fromEntries(kinds.map((kind, i) => [kind, whole[i] + "%"]));
}

// The overlay's corner: a line per Player position, its wins, losses and ties with shares.
function drawStatsByPosition(table, settled) {
  const head = el("div", "stats-line stats-head");
  head.appendChild(el("div", "stats-title", T("stats.title")));
  STAT_ROWS.filter(([, , isShare]) => isShare).forEach(([count, key]) => {
    const th = el("div", "stats-label stats-" + count);
    th.appendChild(el("span", "legend-mark"));
    th.appendChild(el("span", "stats-words", T(key)));
    head.appendChild(th);
  });
  table.appendChild(head);
  for (let p = 1; p <= 5; p++) {
    const row = el("div", "stats-line stats-row");
    row.appendChild(el("div", "stats-seat", seatWords("P" + p)));
    const counts = (roadmap.counts || {})["P" + p] || {};
    const shown = shares(counts, settled);
    STAT_ROWS.filter(([, , isShare]) => isShare).forEach(([count]) => {
      const cell = el("div", "stats-cell", String(counts[count] || 0));
      cell.appendChild(el("span", "stats-share", shown[count]));
      row.appendChild(cell);
    });
    table.appendChild(row);
  }
}

// The last results: a column per hand (P1…P5, B), each round's values and odds, and the
// combinations by name (the Banker's, then the winners'); a cancelled round keeps its line.
// As many results as the room holds in this language and on this monitor: never a cut line.
// Checked on every frame too: a font that loads late can make a line wrap after the draw.
function keepResultsWhole() {
  const box = $("results");
  if (!box) return;
  // by the boxes' own edges, not scrollHeight: that is rounded to a whole pixel, and a line
  // 1.7 px past the edge could pass for one that fits
  const bottom = () => box.getBoundingClientRect().bottom;
  while (box.children.length > 1
         && box.lastElementChild.getBoundingClientRect().bottom > bottom() + 0.5) {
    box.lastElementChild.remove();
  }
}

function drawPlayersResults() {
  const box = $("results");
  if (!box || !catalogue) return;
  const head = $("results-head");
  if (head) {
    head.replaceChildren();
    head.appendChild(el("span", "result-round", "#"));
    head.appendChild(chipNames(HANDS));
    head.appendChild(el("span", "results-title", T("last_results")));
  }
  box.replaceChildren();
  const keep = Number(box.dataset.keep || results.length);
  results.slice(0, keep).forEach((res) => {
    const item = el("li", "result" + (res.cancelled ? " cancelled" : ""));
    item.dataset.round = res.round;
    item.appendChild(el("span", "result-round", "#" + res.round));
    if (res.cancelled) {
      item.appendChild(el("span", "result-cancelled", T("result.cancelled")));
    } else {
      const chips = el("span", "chips");
      const order = res.seats.slice().sort((a, b) => HANDS.indexOf(a.seat) - HANDS.indexOf(b.seat));
      order.forEach((seat) => chips.appendChild(resultChip(seat, (odds) => oddsWords(odds))));
      item.appendChild(chips);
      // the combinations that paid or took: the Banker's, and each winning Player's
      const combos = order.filter((seat) => seat.combo
                                  && (seat.seat === "banker" || seat.outcome === "win"))
        .sort((a, b) => (b.seat === "banker") - (a.seat === "banker"))
        .map((seat) => seatShort(seat.seat) + " " + comboWords(seat));
      item.appendChild(el("span", "result-combos", combos.join(" \u00b7 ")));
    }
    box.appendChild(item);
  });
  keepResultsWhole();
  if (!box.dataset.watched) {  // the room changes when the statistics above it fill in
    box.dataset.watched = "1";
    let height = box.clientHeight;
    new ResizeObserver(() => {
      if (box.clientHeight !== height) { height = box.clientHeight; drawPlayersResults(); }
    }).observe(box);
  }
}
