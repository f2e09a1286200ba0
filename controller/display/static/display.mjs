// The table's screens: one Server-Sent Events stream from the daemon, drawn into the page.
// Read-only: the page only listens. It reconnects by itself; a silent link (no status for
// WATCHDOG_MS: the daemon re-sends it every 5000 ms) is closed and opened again.
"use strict";

const WATCHDOG_MS = 15000;
const SUITS = {S: "\u2660", H: "\u2665", D: "\u2666", C: "\u2663"};
const RED = {H: true, D: true};
const SEAT_NAMES = {P1: "Player 1", P2: "Player 2", P3: "Player 3", P4: "Player 4",
                    P5: "Player 5", banker: "Banker", burn: "Burn"};
const ROUND_TARGETS = ["burn", "P1", "P2", "P3", "P4", "P5", "banker",
                       "P1", "P2", "P3", "P4", "P5", "banker"];
const COMBOS = {face_card_combo: "three faces", ak_flush: "A-K flush"};

let source = null;
let lastMessage = 0;
let countdown = null;   // {deadline: ms on performance.now(), seconds, rate, frozen, left}
let results = [];
let status = null;

function $(id) { return document.getElementById(id); }

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function comboWords(hand) {
  if (!hand.combo) return "";
  return COMBOS[hand.combo] || hand.combo.replace(/_/g, " ");
}

function valueWords(hand) {
  const value = Number(hand.value);
  const shown = Number.isInteger(value) ? String(value) : value.toFixed(1);
  return shown + (value === 1 ? " point" : " points");
}

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

function outcomeWords(seat) {
  if (!seat.outcome) return "";
  if (seat.outcome === "tie") return "TIE";
  return (seat.outcome === "win" ? "WIN " : "LOSE ") + (seat.odds || "");
}

// One seat of the layout: its name, cards (faces once revealed, backs while dealt face down),
// value, combination and outcome.
function drawSeat(node, name, hand, facedown, result, next) {
  node.replaceChildren();
  node.classList.toggle("next", next);
  node.classList.remove("win", "lose", "tie");
  node.appendChild(el("div", "seat-name", SEAT_NAMES[name] || name));
  const cards = el("div", "cards");
  if (hand && hand.cards) {
    hand.cards.forEach((code) => cards.appendChild(cardFace(code)));
  } else {
    for (let i = 0; i < facedown; i++) cards.appendChild(cardBack());
  }
  node.appendChild(cards);
  if (hand && hand.cards) {
    const line = el("div", "hand-value", valueWords(hand));
    const combo = comboWords(hand);
    if (combo) line.appendChild(el("span", "combo", combo));
    node.appendChild(line);
  }
  if (result && result.outcome) {
    node.classList.add(result.outcome);
    const badge = el("div", "outcome " + result.outcome, outcomeWords(result));
    if (result.pair_won) badge.appendChild(el("span", "pair-won", "PAIR"));
    node.appendChild(badge);
  }
  if (next) node.appendChild(el("div", "next-tag", "NEXT CARD"));
}

function drawLayout(view) {
  const felt = $("felt");
  if (!felt) return;
  const dealt = {};
  const inRound = ["betting", "dealing", "revealing"].includes(view.state);
  if (inRound) {
    for (let i = 0; i < view.cards_dealt && i < ROUND_TARGETS.length; i++) {
      const seat = ROUND_TARGETS[i];
      dealt[seat] = (dealt[seat] || 0) + 1;
    }
  }
  // Hands: the open round's, once its betting closed; between rounds the last result.
  let hands = view.hands || {};
  let outcome = {};
  const last = results[0];
  if (!inRound && last) {
    hands = {};
    last.seats.forEach((seat) => { hands[seat.seat] = seat; outcome[seat.seat] = seat; });
  }
  felt.querySelectorAll(".seat").forEach((node) => {
    const name = node.dataset.seat;
    drawSeat(node, name, hands[name], dealt[name] || 0, outcome[name], view.target === name);
  });
}

function drawBanner(view) {
  const banner = $("banner");
  if (!banner) return;
  const b = view.banner;
  banner.hidden = !b;
  document.body.classList.toggle("paused", !!b);
  if (!b) return;
  $("banner-code").textContent = "PAUSED \u2014 " + b.code + (b.detail_code ? " (" + b.detail_code + ")" : "");
  $("banner-by").textContent = b.by ? "paused by " + b.by : "";
  $("banner-reason").textContent = b.reason + (b.held_inputs ? " \u2014 " + b.held_inputs + " inputs held" : "");
  $("banner-way").textContent = b.way_out;
}

function drawHealth(view) {
  const list = $("health");
  if (!list) return;
  list.replaceChildren();
  (view.health || []).forEach((row) => {
    const item = el("li", row.ok ? "ok" : "bad");
    item.dataset.part = row.name;
    item.appendChild(el("span", "part", row.name));
    item.appendChild(el("span", "part-state", row.text));
    list.appendChild(item);
  });
}

function drawHeader(view) {
  $("table").textContent = "Table " + (view.table || "");
  $("shoe").textContent = view.shoe ? "Shoe " + view.shoe : "No shoe";
  const last = results[0];
  $("round").textContent = view.round ? "Round " + view.round
    : (last && last.shoe === view.shoe ? "Round " + last.round + " settled" : "");
  $("cards-left").textContent = view.cards_left !== null && view.cards_left !== undefined && view.shoe
    ? view.cards_left + " cards left" : "";
  $("last-round").hidden = !view.last_round;
  $("title").textContent = view.title;
  document.body.dataset.state = view.state;
}

function drawStatus(view) {
  status = view;
  document.body.dataset.link = "live";
  drawHeader(view);
  drawBanner(view);
  drawHealth(view);
  if ($("step")) $("step").textContent = view.step;
  const bet = view.betting || {};
  if (bet.open && bet.seconds_left !== null && bet.seconds_left !== undefined) {
    const rate = bet.rate > 0 ? bet.rate : 1;
    countdown = {seconds: bet.seconds || 15, frozen: !!bet.frozen, left: bet.seconds_left,
                 deadline: performance.now() + bet.seconds_left * rate * 1000, rate: rate};
  } else {
    countdown = null;
  }
  drawLayout(view);
  tick();
}

// The ring: the share of the betting window left, and the whole seconds left, every frame.
function tick() {
  const ring = $("ring");
  if (!ring) return;
  let left = 0;
  let label = "betting closed";
  if (countdown) {
    left = countdown.frozen ? countdown.left
      : Math.max(0, (countdown.deadline - performance.now()) / 1000 / countdown.rate);
    label = countdown.frozen ? "countdown frozen" : "betting closes in";
  } else if (status && ["no_shoe", "awaiting_flip", "burning", "ready"].includes(status.state)) {
    label = "no betting open";
  }
  const share = countdown ? Math.min(1, left / countdown.seconds) : 0;
  ring.setAttribute("stroke-dashoffset", String(Math.round(1000 * (1 - share))));
  ring.style.opacity = share > 0 ? "1" : "0";
  ring.classList.toggle("hurry", !!countdown && left <= 5);
  $("seconds").textContent = countdown ? String(Math.ceil(left)) : "";
  $("seconds").dataset.left = countdown ? left.toFixed(2) : "";
  $("seconds-label").textContent = label;
}

function drawRoadmap(roadmap) {
  // Drawn by the daemon (controller/display/roadmap_svg.py): one drawer for every screen.
  $("roadmap").innerHTML = roadmap.svg || "";
}

function drawResults(list) {
  results = list || [];
  const box = $("results");
  if (box) {
    box.replaceChildren();
    const keep = Number(box.dataset.keep || results.length);
    results.slice(0, keep).forEach((res) => {
      const item = el("li", "result");
      item.dataset.round = res.round;
      item.appendChild(el("span", "result-round", "R" + res.round));
      res.seats.forEach((seat) => {
        const chip = el("span", "chip " + (seat.outcome || "banker"));
        chip.appendChild(el("span", "chip-seat", seat.seat === "banker" ? "B" : seat.seat));
        chip.appendChild(el("span", "chip-value", valueWords(seat).split(" ")[0]));
        if (seat.pair_won) chip.appendChild(el("span", "chip-pair", "\u25cf"));
        item.appendChild(chip);
      });
      box.appendChild(item);
    });
  }
  if (status) drawLayout(status);
}

function connect() {
  if (source) source.close();
  source = new EventSource("/events");
  lastMessage = performance.now();
  source.addEventListener("state", (e) => {
    const state = JSON.parse(e.data);
    lastMessage = performance.now();
    if (state.results) drawResults(state.results);
    if (state.roadmap) drawRoadmap(state.roadmap);
    if (state.status) drawStatus(state.status);
  });
  source.addEventListener("status", (e) => { lastMessage = performance.now(); drawStatus(JSON.parse(e.data)); });
  source.addEventListener("results", (e) => { lastMessage = performance.now(); drawResults(JSON.parse(e.data)); });
  source.addEventListener("roadmap", (e) => { lastMessage = performance.now(); drawRoadmap(JSON.parse(e.data)); });
  source.onopen = () => { $("link").textContent = "live"; };
  source.onerror = () => {
    document.body.dataset.link = "lost";
    $("link").textContent = "link to the table lost \u2014 reconnecting";
  };
}

function frame() {
  tick();
  if (performance.now() - lastMessage > WATCHDOG_MS) {
    document.body.dataset.link = "lost";
    $("link").textContent = "no word from the table \u2014 reconnecting";
    connect();
  }
}

connect();
setInterval(frame, 100);  // ten frames a second: a smooth ring, an idle kiosk
