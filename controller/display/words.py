# ruff: noqa: E501  (the catalogue: one line per sentence reads and diffs best)
"""Every word the dealer display, the scoreboard and ``pokdeng-table watch`` show, in the
table's languages: English, Filipino, Malay, Persian and Japanese.

The game's terms are the rule sheets' (docs/rules.md §5 for the English names; the Filipino,
Malay, Persian and Japanese sheets for theirs): Player/Manlalaro/Pemain/بازیکن/プレイヤー, the
five combinations, win/lose/tie, the odds. The catalogue is the one source: the pages get it
in the feed's ``state`` message and translate in the browser (so a page can ask for another
language with ``?lang=``); ``watch`` and the feed's English ``step`` use ``say`` here.

A key missing from a language is an error (tests/display/test_words.py), never an English
word on a Japanese screen. Placeholders are ``{name}``, the same in every language.

``step(status)`` is the one source of the dealer's next step: the key and its arguments,
built from the sealed status only (never a card of a round whose betting is open).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from controller.rules.hands import HAND_ORDER
from controller.table.faults import FAULTS
from controller.table.procedure import CARDS_PER_ROUND

LANGUAGES = ("en", "fil", "ms", "fa", "ja")
LANGUAGE_NAMES = {"en": "English", "fil": "Filipino", "ms": "Malay", "fa": "Persian",
                  "ja": "Japanese"}
RTL = frozenset({"fa"})
DEALT_PER_ROUND = CARDS_PER_ROUND - 1  # the burn is not "dealt": 12 cards to the hands

#: the fault codes the table's screens explain (controller/table/faults.py); others: "fault"
FAULT_CODES = (*FAULTS, "fault")

EN: dict[str, str] = {
    "language": "English",
    # seats and the game's terms (docs/rules.md)
    "seat.P": "Player {n}", "seat.banker": "Banker", "seat.burn": "Burn", "seat.flip": "flip card",
    "seat.short.P": "P{n}", "seat.short.banker": "B",
    "combo.ak_flush": "AK Flush", "combo.special_pair": "Special Pair",
    "combo.face_card_combo": "Face-card Combo",
    "combo.single_face_card_no_point": "Single Face-card with No Point",
    "combo.flush_no_point": "Flush with No Point",
    "flush": "Flush", "pair": "Pair",
    "points.one": "1 point", "points": "{v} points",
    "outcome.win": "WIN", "outcome.lose": "LOSE", "outcome.tie": "TIE",
    "odds": "{a}:{b}", "pair_won": "PAIR",
    "bead.win": "W", "bead.lose": "L", "bead.tie": "T",
    "legend.win": "Player wins", "legend.lose": "Player loses", "legend.tie": "Tie",
    "legend.flush": "ring: flush", "legend.pair": "dot: pair",
    # header
    "table": "Table {id}", "shoe": "Shoe {n}", "no_shoe": "No shoe", "round": "Round {n}",
    "round_settled": "Round {n} settled", "cards_left": "{n} cards left",
    "last_round": "LAST ROUND", "last_results": "Last results", "roadmap": "Roadmap",
    # states
    "state.connecting": "Connecting…", "state.starting": "Starting",
    "state.stopped": "Table stopped", "state.no_shoe": "No shoe", "state.awaiting_flip": "New shoe",
    "state.burning": "Burning", "state.ready": "Ready", "state.betting": "Betting open",
    "state.dealing": "Betting closed", "state.revealing": "Revealing", "state.paused": "PAUSED",
    # countdown
    "clock.open": "betting closes in", "clock.frozen": "countdown frozen",
    "clock.closed": "betting closed", "clock.none": "no betting open",
    "clock.seconds": "{n} s",
    # the dealer's next step (one source for the pages and watch)
    "step.connecting": "Connecting to the table…",
    "step.storage": "STOP — the table cannot record — call the supervisor",
    "step.starting": "table starting", "step.stopped": "table stopped",
    "step.paused": "PAUSED — call the supervisor",
    "step.burn_one": "burn 1 card",
    "step.deal": "deal card {n} of {of}: {seat}, {which}",
    "step.deal_to": "deal a card to {seat}",
    "card.first": "first card", "card.second": "second card",
    "step.all_dealt": "all cards dealt — wait for betting to close",
    "step.new_shoe": "press NEW SHOE",
    "step.new_shoe_reconnect": "shoe disconnected — reconnect it, then press NEW SHOE",
    "step.flip": "draw the flip card", "step.burn_more": "burn {n} more",
    "step.start_round": "press START ROUND",
    "step.start_round_last": "press START ROUND (last round of this shoe)",
    "step.start_round_reconnect": "shoe disconnected — reconnect it before START ROUND",
    "step.reveal": "press REVEAL for {seat}", "step.draining": "draining: safe to stop",
    "step.wait": "wait", "next_card": "NEXT CARD",
    # pauses: who, what happened, the way out (docs/faults.md in plain words)
    "banner.paused": "PAUSED", "banner.way_out": "What to do:",
    "banner.by": "paused by {who}", "by.supervisor": "supervisor {user}",
    "by.a_supervisor": "a supervisor", "by.key": "the key switch",
    "by.storage": "the table (storage)", "by.fault": "the table (fault)",
    "banner.held": "{n} inputs held",
    "fault.switch_pause": "The supervisor's key switch is at PAUSE.",
    "way.switch_pause": "Turn the key back to RUN; the countdown goes on with the time it had.",
    "fault.supervisor_pause": "A supervisor paused the table.",
    "way.supervisor_pause": "Wait for the supervisor to resume the table.",
    "fault.card_no_round": "A card came out while no round was open.",
    "way.card_no_round": "Set the card aside, then the supervisor resumes.",
    "fault.card_while_paused": "A card came out while the table was paused.",
    "way.card_while_paused": "Set the card aside, then the supervisor resumes or cancels the round.",
    "fault.too_many_cards": "One card too many in this round.",
    "way.too_many_cards": "Set the card aside, then the supervisor resumes or cancels the round.",
    "fault.ninth_copy": "The shoe read a card that cannot be in it (a bad read or a foreign card).",
    "way.ninth_copy": "The supervisor enters the card actually drawn, or cancels the round.",
    "fault.shoe_overdrawn": "More cards came out than the shoe holds.",
    "way.shoe_overdrawn": "Cancel the round; the supervisor ends the shoe.",
    "fault.misread": "The shoe could not read the card.",
    "way.misread": "The supervisor enters the card by hand, or cancels the round.",
    "fault.second_cut_card": "A second cut card came out.",
    "way.second_cut_card": "Set it aside; the supervisor resumes.",
    "fault.cut_card_no_shoe": "A cut card came out with no shoe open.",
    "way.cut_card_no_shoe": "Set it aside; the supervisor resumes.",
    "fault.unknown_shoe_frame": "The shoe sent something the table does not know (often the cut card).",
    "way.unknown_shoe_frame": "Call the supervisor: if it was the cut card, this shoe ends after the round.",
    "fault.shoe_lost": "The shoe is disconnected.",
    "way.shoe_lost": "Reconnect the shoe; the supervisor resumes.",
    "fault.journal_unwritable": "The table cannot record (storage).",
    "way.journal_unwritable": "Stop dealing. The supervisor fixes the storage, then resumes.",
    "fault.journal_check_failed": "The table's record failed its check: it was changed or damaged.",
    "way.journal_check_failed": "Stop dealing. The supervisor checks the record before the table goes on.",
    "fault.controller_fault": "The controller reported a problem.",
    "way.controller_fault": "Call the supervisor.",
    "fault.fault": "The table stopped on a problem.",
    "way.fault": "Call the supervisor.",
    # the devices box
    "part.shoe": "Card shoe", "part.panel": "Button panel", "part.key": "Key switch",
    "part.backend": "Results to {name}", "part.journal": "Record", "part.clock": "Clock",
    "health.connected": "connected", "health.not_connected": "NOT CONNECTED",
    "health.run": "RUN", "health.pause": "PAUSE",
    "health.up_to_date": "all sent", "health.to_send": "{n} waiting",
    "health.unreachable": "UNREACHABLE", "health.retrying": "retrying",
    "health.refused": "REFUSED", "health.no_subscriber": "nobody listening",
    "health.disconnected": "DISCONNECTED", "health.starting": "starting",
    "health.no_status": "no status", "health.ok": "ok", "health.cannot_write": "CANNOT WRITE",
    "health.check_failed": "CHECK FAILED", "health.synced": "synced",
    "health.not_synced": "NOT SYNCED", "health.unknown": "unknown",
    # the link to the table
    "link.connecting": "connecting…", "link.live": "live",
    "link.lost": "link to the table lost — reconnecting",
    "link.silent": "no word from the table — reconnecting",
    # watch only
    "watch.head": "table {id}", "watch.shoe": "shoe {n}", "watch.round": "round {n}",
    "watch.closes_in": "betting closes in {n} s", "watch.cards_left": "{n} cards left in the shoe",
    "watch.not_connected": "NOT CONNECTED: {names}",
    "watch.clock": "CLOCK NOT SYNCHRONISED — tell the supervisor",
    "watch.unreachable": "BACKEND UNREACHABLE: {names}",
    "watch.held": "{n} inputs held",
    # players' scoreboard (/scoreboard, /overlay): what happened and what it means for bets
    "notice.paused": "Short pause — the round continues, all bets stand",
    "notice.misread": "A card is being checked — the round continues, all bets stand",
    "notice.cancelled": "Round {n} cancelled — all bets are refunded",
    "call.place_bets": "Place your bets", "call.no_more_bets": "No more bets",
    "result.cancelled": "Cancelled — bets refunded", "result.latest": "Round {n}",
    "shuffling": "Shuffling — new shoe", "shuffling.detail": "The next round opens after the burn",
    "stats.title": "Statistics", "stats.rounds": "{n} rounds", "stats.cancelled": "{n} cancelled",
    "stats.flushes": "Flushes", "stats.pairs": "Pairs",
    "limits.title": "Table limits", "limits.player": "Player bet", "limits.pair": "Pair bet",
    "paytable.title": "Paytable", "pay.win": "Player wins",
    "pay.win_pattern": "Player wins with a pattern", "pay.lose_pattern": "Banker wins with a pattern",
    "pay.tie": "Tie: bet returned", "pay.pair": "Pair bet wins",
    "pay.banker_06": "Banker 0 or 6: a pattern win pays 1:1; 8 or 9 with a flush or pair 2:1",
    "pay.pattern": "pattern: flush, pair or combination",
    "game_id": "Game {id}", "winner.pok": "Pok {v}",
}

FIL: dict[str, str] = {
    "language": "Filipino",
    "seat.P": "Manlalaro {n}", "seat.banker": "Banker", "seat.burn": "Burn",
    "seat.flip": "flip card", "seat.short.P": "M{n}", "seat.short.banker": "B",
    "combo.ak_flush": "AK Flush", "combo.special_pair": "Espesyal na Pares",
    "combo.face_card_combo": "Face-card Combo",
    "combo.single_face_card_no_point": "Single Face-card na Walang Puntos",
    "combo.flush_no_point": "Flush na Walang Puntos",
    "flush": "Flush", "pair": "Pares",
    "points.one": "1 puntos", "points": "{v} puntos",
    "outcome.win": "PANALO", "outcome.lose": "TALO", "outcome.tie": "TABLA",
    "odds": "{a}:{b}", "pair_won": "PARES",
    "bead.win": "+", "bead.lose": "−", "bead.tie": "=",
    "legend.win": "Panalo ang Manlalaro", "legend.lose": "Talo ang Manlalaro", "legend.tie": "Tabla",
    "legend.flush": "bilog: flush", "legend.pair": "tuldok: pares",
    "table": "Mesa {id}", "shoe": "Shoe {n}", "no_shoe": "Walang shoe", "round": "Round {n}",
    "round_settled": "Tapos ang round {n}", "cards_left": "{n} baraha pa",
    "last_round": "HULING ROUND", "last_results": "Mga huling resulta", "roadmap": "Roadmap",
    "state.connecting": "Kumokonekta…", "state.starting": "Nagsisimula",
    "state.stopped": "Nakahinto ang mesa", "state.no_shoe": "Walang shoe",
    "state.awaiting_flip": "Bagong shoe", "state.burning": "Nagbu-burn", "state.ready": "Handa",
    "state.betting": "Bukas ang taya", "state.dealing": "Sarado ang taya",
    "state.revealing": "Ipinapakita", "state.paused": "NAKAHINTO",
    "clock.open": "magsasara ang taya sa", "clock.frozen": "nakahinto ang countdown",
    "clock.closed": "sarado ang taya", "clock.none": "walang bukas na taya",
    "clock.seconds": "{n} s",
    "step.connecting": "Kumokonekta sa mesa…",
    "step.storage": "TIGIL — hindi makapagtala ang mesa — tawagin ang supervisor",
    "step.starting": "nagsisimula ang mesa", "step.stopped": "nakahinto ang mesa",
    "step.paused": "NAKAHINTO — tawagin ang supervisor",
    "step.burn_one": "mag-burn ng 1 baraha",
    "step.deal": "ibigay ang baraha {n} ng {of}: {seat}, {which}",
    "step.deal_to": "magbigay ng baraha kay {seat}",
    "card.first": "unang baraha", "card.second": "ikalawang baraha",
    "step.all_dealt": "naibigay na lahat — hintaying magsara ang taya",
    "step.new_shoe": "pindutin ang NEW SHOE",
    "step.new_shoe_reconnect": "hindi nakakonekta ang shoe — ikonekta, saka pindutin ang NEW SHOE",
    "step.flip": "hugutin ang flip card", "step.burn_more": "mag-burn pa ng {n}",
    "step.start_round": "pindutin ang START ROUND",
    "step.start_round_last": "pindutin ang START ROUND (huling round ng shoe na ito)",
    "step.start_round_reconnect": "hindi nakakonekta ang shoe — ikonekta bago ang START ROUND",
    "step.reveal": "pindutin ang REVEAL para kay {seat}",
    "step.draining": "nagtatapos: ligtas nang ihinto",
    "step.wait": "maghintay", "next_card": "SUSUNOD NA BARAHA",
    "banner.paused": "NAKAHINTO", "banner.way_out": "Gawin:",
    "banner.by": "inihinto ng {who}", "by.supervisor": "supervisor {user}",
    "by.a_supervisor": "isang supervisor", "by.key": "ang key switch",
    "by.storage": "ang mesa (storage)", "by.fault": "ang mesa (problema)",
    "banner.held": "{n} input ang nakabinbin",
    "fault.switch_pause": "Nasa PAUSE ang key switch ng supervisor.",
    "way.switch_pause": "Ibalik ang susi sa RUN; itutuloy ang countdown sa natitirang oras.",
    "fault.supervisor_pause": "Inihinto ng supervisor ang mesa.",
    "way.supervisor_pause": "Hintaying ituloy ng supervisor ang mesa.",
    "fault.card_no_round": "May lumabas na baraha habang walang bukas na round.",
    "way.card_no_round": "Itabi ang baraha, saka itutuloy ng supervisor.",
    "fault.card_while_paused": "May lumabas na baraha habang nakahinto ang mesa.",
    "way.card_while_paused": "Itabi ang baraha; itutuloy o kakanselahin ng supervisor ang round.",
    "fault.too_many_cards": "Sobra ng isang baraha sa round na ito.",
    "way.too_many_cards": "Itabi ang baraha; itutuloy o kakanselahin ng supervisor ang round.",
    "fault.ninth_copy": "Nakabasa ang shoe ng barahang hindi maaaring nasa loob nito.",
    "way.ninth_copy": "Ilalagay ng supervisor ang tunay na baraha, o kakanselahin ang round.",
    "fault.shoe_overdrawn": "Mas maraming baraha ang lumabas kaysa laman ng shoe.",
    "way.shoe_overdrawn": "Kanselahin ang round; tatapusin ng supervisor ang shoe.",
    "fault.misread": "Hindi nabasa ng shoe ang baraha.",
    "way.misread": "Ilalagay ng supervisor ang baraha nang mano-mano, o kakanselahin ang round.",
    "fault.second_cut_card": "Lumabas ang ikalawang cut card.",
    "way.second_cut_card": "Itabi ito; itutuloy ng supervisor.",
    "fault.cut_card_no_shoe": "Lumabas ang cut card nang walang bukas na shoe.",
    "way.cut_card_no_shoe": "Itabi ito; itutuloy ng supervisor.",
    "fault.unknown_shoe_frame": "May ipinadala ang shoe na hindi kilala ng mesa (kadalasan ang cut card).",
    "way.unknown_shoe_frame": "Tawagin ang supervisor: kung cut card iyon, matatapos ang shoe pagkatapos ng round.",
    "fault.shoe_lost": "Hindi nakakonekta ang shoe.",
    "way.shoe_lost": "Ikonekta ang shoe; itutuloy ng supervisor.",
    "fault.journal_unwritable": "Hindi makapagtala ang mesa (storage).",
    "way.journal_unwritable": "Huwag munang mamigay. Aayusin ng supervisor ang storage, saka itutuloy.",
    "fault.journal_check_failed": "Bigo ang pagsuri sa talaan ng mesa: binago o nasira ito.",
    "way.journal_check_failed": "Huwag munang mamigay. Susuriin ng supervisor ang talaan bago magpatuloy.",
    "fault.controller_fault": "May iniulat na problema ang controller.",
    "way.controller_fault": "Tawagin ang supervisor.",
    "fault.fault": "Huminto ang mesa dahil sa problema.",
    "way.fault": "Tawagin ang supervisor.",
    "part.shoe": "Shoe", "part.panel": "Panel ng button", "part.key": "Susi ng supervisor",
    "part.backend": "Resulta sa {name}", "part.journal": "Talaan", "part.clock": "Orasan",
    "health.connected": "nakakonekta", "health.not_connected": "HINDI NAKAKONEKTA",
    "health.run": "RUN", "health.pause": "PAUSE",
    "health.up_to_date": "naipadala lahat", "health.to_send": "{n} naghihintay",
    "health.unreachable": "HINDI MAABOT", "health.retrying": "sinusubukang muli",
    "health.refused": "TINANGGIHAN", "health.no_subscriber": "walang nakikinig",
    "health.disconnected": "HINDI NAKAKONEKTA", "health.starting": "nagsisimula",
    "health.no_status": "walang status", "health.ok": "ok",
    "health.cannot_write": "HINDI MAISULAT", "health.check_failed": "BIGO ANG PAGSURI",
    "health.synced": "tugma", "health.not_synced": "HINDI TUGMA", "health.unknown": "hindi alam",
    "link.connecting": "kumokonekta…", "link.live": "live",
    "link.lost": "nawala ang koneksyon sa mesa — kumokonektang muli",
    "link.silent": "walang balita mula sa mesa — kumokonektang muli",
    "watch.head": "mesa {id}", "watch.shoe": "shoe {n}", "watch.round": "round {n}",
    "watch.closes_in": "magsasara ang taya sa {n} s",
    "watch.cards_left": "{n} baraha ang natitira sa shoe",
    "watch.not_connected": "HINDI NAKAKONEKTA: {names}",
    "watch.clock": "HINDI TUGMA ANG ORASAN — sabihan ang supervisor",
    "watch.unreachable": "HINDI MAABOT ANG BACKEND: {names}",
    "watch.held": "{n} input ang nakabinbin",
    # players' scoreboard (/scoreboard, /overlay): what happened and what it means for bets
    "notice.paused": "Sandaling hinto — magpapatuloy ang round, balido ang lahat ng pustahan",
    "notice.misread": "Sinusuri ang isang baraha — magpapatuloy ang round, balido ang lahat ng pustahan",
    "notice.cancelled": "Kinansela ang round {n} — ang lahat ng pustahan ay ibabalik",
    "call.place_bets": "Maglagay na ng taya", "call.no_more_bets": "Hindi na pwedeng tumaya",
    "result.cancelled": "Kinansela — ibabalik ang taya", "result.latest": "Round {n}",
    "shuffling": "Nagsha-shuffle — bagong shoe",
    "shuffling.detail": "Magbubukas ang susunod na round pagkatapos ng burn",
    "stats.title": "Estadistika", "stats.rounds": "{n} na round", "stats.cancelled": "{n} kinansela",
    "stats.flushes": "Mga flush", "stats.pairs": "Mga pares",
    "limits.title": "Limitasyon ng mesa", "limits.player": "Taya sa Manlalaro",
    "limits.pair": "Taya sa Pares", "paytable.title": "Talaan ng bayad",
    "pay.win": "Panalo ang Manlalaro", "pay.win_pattern": "Panalo ang Manlalaro na may padron",
    "pay.lose_pattern": "Panalo ang Banker na may padron", "pay.tie": "Tabla: ibabalik ang taya",
    "pay.pair": "Panalo ang Pares ng Manlalaro",
    "pay.banker_06": "Banker na may 0 o 6: 1:1 ang panalo sa padron; 8 o 9 na may flush o pares 2:1",
    "pay.pattern": "padron: flush, pares o espesyal na kombinasyon",
    "game_id": "Laro {id}", "winner.pok": "Pok {v}",
}

MS: dict[str, str] = {
    "language": "Bahasa Melayu",
    "seat.P": "Pemain {n}", "seat.banker": "Banker", "seat.burn": "Bakar",
    "seat.flip": "kad balik", "seat.short.P": "P{n}", "seat.short.banker": "B",
    "combo.ak_flush": "AK Flush", "combo.special_pair": "Pasangan Khas",
    "combo.face_card_combo": "Kombo Kad Muka",
    "combo.single_face_card_no_point": "Kad Muka Tunggal tanpa Mata",
    "combo.flush_no_point": "Flush tanpa Mata",
    "flush": "Flush", "pair": "Pasangan",
    "points.one": "1 mata", "points": "{v} mata",
    "outcome.win": "MENANG", "outcome.lose": "KALAH", "outcome.tie": "SERI",
    "odds": "{a}:{b}", "pair_won": "PASANGAN",
    "bead.win": "M", "bead.lose": "K", "bead.tie": "S",
    "legend.win": "Pemain Menang", "legend.lose": "Pemain Kalah", "legend.tie": "Seri",
    "legend.flush": "bulatan: flush", "legend.pair": "titik kuning: pasangan",
    "table": "Meja {id}", "shoe": "Kasut {n}", "no_shoe": "Tiada kasut", "round": "Pusingan {n}",
    "round_settled": "Pusingan {n} selesai", "cards_left": "{n} kad lagi",
    "last_round": "PUSINGAN TERAKHIR", "last_results": "Keputusan terakhir", "roadmap": "Peta",
    "state.connecting": "Menyambung…", "state.starting": "Bermula",
    "state.stopped": "Meja berhenti", "state.no_shoe": "Tiada kasut",
    "state.awaiting_flip": "Kasut baharu", "state.burning": "Membakar", "state.ready": "Sedia",
    "state.betting": "Pertaruhan dibuka", "state.dealing": "Pertaruhan ditutup",
    "state.revealing": "Mendedahkan", "state.paused": "DIJEDA",
    "clock.open": "pertaruhan ditutup dalam", "clock.frozen": "kira detik dibekukan",
    "clock.closed": "pertaruhan ditutup", "clock.none": "tiada pertaruhan dibuka",
    "clock.seconds": "{n} s",
    "step.connecting": "Menyambung ke meja…",
    "step.storage": "BERHENTI — meja tidak dapat merekod — panggil penyelia",
    "step.starting": "meja bermula", "step.stopped": "meja berhenti",
    "step.paused": "DIJEDA — panggil penyelia",
    "step.burn_one": "bakar 1 kad",
    "step.deal": "edar kad {n} daripada {of}: {seat}, {which}",
    "step.deal_to": "edar kad kepada {seat}",
    "card.first": "kad pertama", "card.second": "kad kedua",
    "step.all_dealt": "semua kad diedar — tunggu pertaruhan ditutup",
    "step.new_shoe": "tekan NEW SHOE",
    "step.new_shoe_reconnect": "kasut terputus — sambungkan, kemudian tekan NEW SHOE",
    "step.flip": "tarik kad balik", "step.burn_more": "bakar {n} lagi",
    "step.start_round": "tekan START ROUND",
    "step.start_round_last": "tekan START ROUND (pusingan terakhir kasut ini)",
    "step.start_round_reconnect": "kasut terputus — sambungkan sebelum START ROUND",
    "step.reveal": "tekan REVEAL untuk {seat}",
    "step.draining": "mengosongkan: selamat untuk berhenti",
    "step.wait": "tunggu", "next_card": "KAD SETERUSNYA",
    "banner.paused": "DIJEDA", "banner.way_out": "Apa perlu dibuat:",
    "banner.by": "dijeda oleh {who}", "by.supervisor": "penyelia {user}",
    "by.a_supervisor": "seorang penyelia", "by.key": "suis kunci",
    "by.storage": "meja (storan)", "by.fault": "meja (masalah)",
    "banner.held": "{n} input ditahan",
    "fault.switch_pause": "Suis kunci penyelia berada pada PAUSE.",
    "way.switch_pause": "Pusing kunci kembali ke RUN; kira detik diteruskan dengan masa yang tinggal.",
    "fault.supervisor_pause": "Penyelia menjeda meja.",
    "way.supervisor_pause": "Tunggu penyelia menyambung semula meja.",
    "fault.card_no_round": "Kad keluar semasa tiada pusingan dibuka.",
    "way.card_no_round": "Ketepikan kad itu, kemudian penyelia menyambung semula.",
    "fault.card_while_paused": "Kad keluar semasa meja dijeda.",
    "way.card_while_paused": "Ketepikan kad itu; penyelia menyambung semula atau membatalkan pusingan.",
    "fault.too_many_cards": "Terlebih satu kad dalam pusingan ini.",
    "way.too_many_cards": "Ketepikan kad itu; penyelia menyambung semula atau membatalkan pusingan.",
    "fault.ninth_copy": "Kasut membaca kad yang tidak mungkin ada di dalamnya.",
    "way.ninth_copy": "Penyelia memasukkan kad yang sebenar, atau membatalkan pusingan.",
    "fault.shoe_overdrawn": "Lebih banyak kad keluar daripada isi kasut.",
    "way.shoe_overdrawn": "Batalkan pusingan; penyelia menamatkan kasut.",
    "fault.misread": "Kasut tidak dapat membaca kad.",
    "way.misread": "Penyelia memasukkan kad secara manual, atau membatalkan pusingan.",
    "fault.second_cut_card": "Kad potong kedua keluar.",
    "way.second_cut_card": "Ketepikannya; penyelia menyambung semula.",
    "fault.cut_card_no_shoe": "Kad potong keluar semasa tiada kasut dibuka.",
    "way.cut_card_no_shoe": "Ketepikannya; penyelia menyambung semula.",
    "fault.unknown_shoe_frame": "Kasut menghantar sesuatu yang meja tidak kenal (selalunya kad potong).",
    "way.unknown_shoe_frame": "Panggil penyelia: jika itu kad potong, kasut ini tamat selepas pusingan.",
    "fault.shoe_lost": "Kasut terputus.",
    "way.shoe_lost": "Sambungkan kasut; penyelia menyambung semula.",
    "fault.journal_unwritable": "Meja tidak dapat merekod (storan).",
    "way.journal_unwritable": "Berhenti mengedar. Penyelia membaiki storan, kemudian menyambung semula.",
    "fault.journal_check_failed": "Rekod meja gagal disemak: ia telah diubah atau rosak.",
    "way.journal_check_failed": "Berhenti mengedar. Penyelia menyemak rekod sebelum meja diteruskan.",
    "fault.controller_fault": "Pengawal melaporkan masalah.",
    "way.controller_fault": "Panggil penyelia.",
    "fault.fault": "Meja berhenti kerana masalah.",
    "way.fault": "Panggil penyelia.",
    "part.shoe": "Kasut kad", "part.panel": "Panel butang", "part.key": "Suis kunci",
    "part.backend": "Keputusan ke {name}", "part.journal": "Rekod", "part.clock": "Jam",
    "health.connected": "bersambung", "health.not_connected": "TIDAK BERSAMBUNG",
    "health.run": "RUN", "health.pause": "PAUSE",
    "health.up_to_date": "semua dihantar", "health.to_send": "{n} menunggu",
    "health.unreachable": "TIDAK DAPAT DICAPAI", "health.retrying": "mencuba semula",
    "health.refused": "DITOLAK", "health.no_subscriber": "tiada pendengar",
    "health.disconnected": "TERPUTUS", "health.starting": "bermula",
    "health.no_status": "tiada status", "health.ok": "ok",
    "health.cannot_write": "TIDAK BOLEH MENULIS", "health.check_failed": "SEMAKAN GAGAL",
    "health.synced": "segerak", "health.not_synced": "TIDAK SEGERAK",
    "health.unknown": "tidak diketahui",
    "link.connecting": "menyambung…", "link.live": "langsung",
    "link.lost": "sambungan ke meja terputus — menyambung semula",
    "link.silent": "tiada berita dari meja — menyambung semula",
    "watch.head": "meja {id}", "watch.shoe": "kasut {n}", "watch.round": "pusingan {n}",
    "watch.closes_in": "pertaruhan ditutup dalam {n} s",
    "watch.cards_left": "{n} kad lagi dalam kasut",
    "watch.not_connected": "TIDAK BERSAMBUNG: {names}",
    "watch.clock": "JAM TIDAK SEGERAK — beritahu penyelia",
    "watch.unreachable": "BACKEND TIDAK DAPAT DICAPAI: {names}",
    "watch.held": "{n} input ditahan",
    # players' scoreboard (/scoreboard, /overlay): what happened and what it means for bets
    "notice.paused": "Digantung sebentar — pusingan diteruskan, semua pertaruhan kekal",
    "notice.misread": "Sekeping kad sedang disemak — pusingan diteruskan, semua pertaruhan kekal",
    "notice.cancelled": "Pusingan {n} dibatalkan — semua pertaruhan akan dikembalikan",
    "call.place_bets": "Sila buat pertaruhan", "call.no_more_bets": "Tiada lagi pertaruhan",
    "result.cancelled": "Dibatalkan — pertaruhan dikembalikan", "result.latest": "Pusingan {n}",
    "shuffling": "Kad dikocok — kasut baharu",
    "shuffling.detail": "Pusingan seterusnya dibuka selepas kad dibakar",
    "stats.title": "Statistik", "stats.rounds": "{n} pusingan", "stats.cancelled": "{n} dibatalkan",
    "stats.flushes": "Flush", "stats.pairs": "Pasangan",
    "limits.title": "Had meja", "limits.player": "Pertaruhan Pemain",
    "limits.pair": "Pertaruhan Pasangan", "paytable.title": "Jadual bayaran",
    "pay.win": "Pemain menang", "pay.win_pattern": "Pemain menang dengan corak istimewa",
    "pay.lose_pattern": "Banker menang dengan corak istimewa",
    "pay.tie": "Seri: pertaruhan dikembalikan", "pay.pair": "Pemain Pasangan menang",
    "pay.banker_06": "Banker 0 atau 6 mata: menang dengan corak 1:1; 8 atau 9 dengan flush atau pasangan 2:1",
    "pay.pattern": "corak: flush, pasangan atau gabungan istimewa",
    "game_id": "Permainan {id}", "winner.pok": "Pok {v}",
}

FA: dict[str, str] = {
    "language": "فارسی",
    "seat.P": "بازیکن {n}", "seat.banker": "بانکدار", "seat.burn": "سوزاندن",
    "seat.flip": "کارت رو", "seat.short.P": "{n}", "seat.short.banker": "ب",
    "combo.ak_flush": "فلاش AK", "combo.special_pair": "جفت خاص",
    "combo.face_card_combo": "ترکیب کارت صورت",
    "combo.single_face_card_no_point": "تک کارت صورت بدون امتیاز",
    "combo.flush_no_point": "فلاش بدون امتیاز",
    "flush": "فلاش", "pair": "جفت",
    "points.one": "1 امتیاز", "points": "{v} امتیاز",
    "outcome.win": "برد", "outcome.lose": "باخت", "outcome.tie": "مساوی",
    "odds": "{a} به {b}", "pair_won": "جفت",
    "bead.win": "+", "bead.lose": "−", "bead.tie": "=",
    "legend.win": "برد بازیکن", "legend.lose": "باخت بازیکن", "legend.tie": "مساوی",
    "legend.flush": "دایره بیرونی: فلاش", "legend.pair": "نقطه زرد: جفت",
    "table": "میز {id}", "shoe": "جاکارتی {n}", "no_shoe": "بدون جاکارتی", "round": "دور {n}",
    "round_settled": "دور {n} تسویه شد", "cards_left": "{n} کارت مانده",
    "last_round": "دور آخر", "last_results": "نتایج اخیر", "roadmap": "نقشه",
    "state.connecting": "در حال اتصال…", "state.starting": "در حال شروع",
    "state.stopped": "میز متوقف است", "state.no_shoe": "بدون جاکارتی",
    "state.awaiting_flip": "جاکارتی جدید", "state.burning": "سوزاندن", "state.ready": "آماده",
    "state.betting": "شرط‌بندی باز است", "state.dealing": "شرط‌بندی بسته شد",
    "state.revealing": "رو کردن کارت‌ها", "state.paused": "متوقف",
    "clock.open": "پایان شرط‌بندی تا", "clock.frozen": "شمارش معکوس متوقف",
    "clock.closed": "شرط‌بندی بسته شد", "clock.none": "شرط‌بندی باز نیست",
    "clock.seconds": "{n} ثانیه",
    "step.connecting": "در حال اتصال به میز…",
    "step.storage": "توقف — میز نمی‌تواند ثبت کند — سرپرست را صدا کنید",
    "step.starting": "میز در حال شروع", "step.stopped": "میز متوقف است",
    "step.paused": "متوقف — سرپرست را صدا کنید",
    "step.burn_one": "1 کارت بسوزانید",
    "step.deal": "کارت {n} از {of}: {seat}، {which}",
    "step.deal_to": "یک کارت به {seat} بدهید",
    "card.first": "کارت اول", "card.second": "کارت دوم",
    "step.all_dealt": "همه کارت‌ها پخش شد — صبر کنید تا شرط‌بندی بسته شود",
    "step.new_shoe": "NEW SHOE را بزنید",
    "step.new_shoe_reconnect": "جاکارتی قطع است — وصل کنید، سپس NEW SHOE را بزنید",
    "step.flip": "کارت رو را بکشید", "step.burn_more": "{n} کارت دیگر بسوزانید",
    "step.start_round": "START ROUND را بزنید",
    "step.start_round_last": "START ROUND را بزنید (دور آخر این جاکارتی)",
    "step.start_round_reconnect": "جاکارتی قطع است — پیش از START ROUND وصل کنید",
    "step.reveal": "REVEAL را برای {seat} بزنید",
    "step.draining": "در حال تخلیه: توقف بی‌خطر است",
    "step.wait": "صبر کنید", "next_card": "کارت بعدی",
    "banner.paused": "متوقف", "banner.way_out": "چه باید کرد:",
    "banner.by": "توقف توسط {who}", "by.supervisor": "سرپرست {user}",
    "by.a_supervisor": "یک سرپرست", "by.key": "کلید سرپرست",
    "by.storage": "میز (حافظه)", "by.fault": "میز (خطا)",
    "banner.held": "{n} ورودی در انتظار",
    "fault.switch_pause": "کلید سرپرست روی PAUSE است.",
    "way.switch_pause": "کلید را به RUN برگردانید؛ شمارش معکوس با زمان باقی‌مانده ادامه می‌یابد.",
    "fault.supervisor_pause": "سرپرست میز را متوقف کرده است.",
    "way.supervisor_pause": "صبر کنید تا سرپرست میز را ادامه دهد.",
    "fault.card_no_round": "وقتی هیچ دوری باز نبود، کارتی بیرون آمد.",
    "way.card_no_round": "کارت را کنار بگذارید؛ سپس سرپرست ادامه می‌دهد.",
    "fault.card_while_paused": "در زمان توقف میز، کارتی بیرون آمد.",
    "way.card_while_paused": "کارت را کنار بگذارید؛ سرپرست ادامه می‌دهد یا دور را لغو می‌کند.",
    "fault.too_many_cards": "در این دور یک کارت اضافه بیرون آمد.",
    "way.too_many_cards": "کارت را کنار بگذارید؛ سرپرست ادامه می‌دهد یا دور را لغو می‌کند.",
    "fault.ninth_copy": "جاکارتی کارتی خواند که نمی‌تواند در آن باشد.",
    "way.ninth_copy": "سرپرست کارت واقعی را وارد می‌کند یا دور را لغو می‌کند.",
    "fault.shoe_overdrawn": "بیش از گنجایش جاکارتی کارت بیرون آمد.",
    "way.shoe_overdrawn": "دور را لغو کنید؛ سرپرست جاکارتی را پایان می‌دهد.",
    "fault.misread": "جاکارتی نتوانست کارت را بخواند.",
    "way.misread": "سرپرست کارت را دستی وارد می‌کند یا دور را لغو می‌کند.",
    "fault.second_cut_card": "کارت برش دوم بیرون آمد.",
    "way.second_cut_card": "آن را کنار بگذارید؛ سرپرست ادامه می‌دهد.",
    "fault.cut_card_no_shoe": "کارت برش بدون جاکارتی باز بیرون آمد.",
    "way.cut_card_no_shoe": "آن را کنار بگذارید؛ سرپرست ادامه می‌دهد.",
    "fault.unknown_shoe_frame": "جاکارتی چیزی فرستاد که میز نمی‌شناسد (اغلب کارت برش).",
    "way.unknown_shoe_frame": "سرپرست را صدا کنید: اگر کارت برش بود، این جاکارتی پس از این دور پایان می‌یابد.",
    "fault.shoe_lost": "جاکارتی قطع شده است.",
    "way.shoe_lost": "جاکارتی را وصل کنید؛ سرپرست ادامه می‌دهد.",
    "fault.journal_unwritable": "میز نمی‌تواند ثبت کند (حافظه).",
    "way.journal_unwritable": "پخش را متوقف کنید. سرپرست حافظه را درست می‌کند و ادامه می‌دهد.",
    "fault.journal_check_failed": "بررسی ثبت میز ناموفق بود: ثبت تغییر کرده یا آسیب دیده است.",
    "way.journal_check_failed": "پخش را متوقف کنید. سرپرست پیش از ادامه، ثبت را بررسی می‌کند.",
    "fault.controller_fault": "کنترلر مشکلی گزارش کرد.",
    "way.controller_fault": "سرپرست را صدا کنید.",
    "fault.fault": "میز به دلیل مشکلی متوقف شد.",
    "way.fault": "سرپرست را صدا کنید.",
    "part.shoe": "جاکارتی", "part.panel": "پنل دکمه‌ها", "part.key": "کلید سرپرست",
    "part.backend": "ارسال نتایج به {name}", "part.journal": "ثبت", "part.clock": "ساعت",
    "health.connected": "وصل", "health.not_connected": "وصل نیست",
    "health.run": "RUN", "health.pause": "PAUSE",
    "health.up_to_date": "همه ارسال شد", "health.to_send": "{n} در انتظار",
    "health.unreachable": "در دسترس نیست", "health.retrying": "تلاش دوباره",
    "health.refused": "رد شد", "health.no_subscriber": "گیرنده‌ای نیست",
    "health.disconnected": "قطع", "health.starting": "در حال شروع",
    "health.no_status": "بدون وضعیت", "health.ok": "سالم",
    "health.cannot_write": "نوشتن ممکن نیست", "health.check_failed": "بررسی ناموفق",
    "health.synced": "همگام", "health.not_synced": "همگام نیست", "health.unknown": "نامعلوم",
    "link.connecting": "در حال اتصال…", "link.live": "زنده",
    "link.lost": "اتصال به میز قطع شد — اتصال دوباره",
    "link.silent": "خبری از میز نیست — اتصال دوباره",
    "watch.head": "میز {id}", "watch.shoe": "جاکارتی {n}", "watch.round": "دور {n}",
    "watch.closes_in": "پایان شرط‌بندی تا {n} ثانیه",
    "watch.cards_left": "{n} کارت در جاکارتی مانده",
    "watch.not_connected": "وصل نیست: {names}",
    "watch.clock": "ساعت همگام نیست — به سرپرست بگویید",
    "watch.unreachable": "سرور نتایج در دسترس نیست: {names}",
    "watch.held": "{n} ورودی در انتظار",
    # players' scoreboard (/scoreboard, /overlay): what happened and what it means for bets
    "notice.paused": "توقف کوتاه — دور ادامه می‌یابد، همه شرط‌ها معتبر است",
    "notice.misread": "یک کارت در حال بررسی است — دور ادامه می‌یابد، همه شرط‌ها معتبر است",
    "notice.cancelled": "دور {n} لغو شد — تمام شرط‌ها بازپرداخت می‌شوند",
    "call.place_bets": "شرط‌های خود را ببندید", "call.no_more_bets": "شرط‌بندی بسته شد",
    "result.cancelled": "لغو شد — شرط‌ها بازپرداخت می‌شوند", "result.latest": "دور {n}",
    "shuffling": "بُر زدن — جاکارتی جدید",
    "shuffling.detail": "دور بعد پس از سوزاندن کارت‌ها باز می‌شود",
    "stats.title": "آمار", "stats.rounds": "{n} دور", "stats.cancelled": "{n} لغو شده",
    "stats.flushes": "فلاش‌ها", "stats.pairs": "جفت‌ها",
    "limits.title": "حدود میز", "limits.player": "شرط بازیکن", "limits.pair": "شرط دست جفت",
    "paytable.title": "جدول پرداخت",
    "pay.win": "برد بازیکن", "pay.win_pattern": "برد بازیکن با ترکیب خاص",
    "pay.lose_pattern": "برد بانکدار با ترکیب خاص", "pay.tie": "مساوی: شرط بازگردانده می‌شود",
    "pay.pair": "برد دست جفت بازیکن",
    "pay.banker_06": "بانکدار 0 یا 6: برد با ترکیب خاص 1 به 1؛ با 8 یا 9 و فلاش یا جفت 2 به 1",
    "pay.pattern": "ترکیب خاص: فلاش، جفت یا ترکیب‌های ویژه",
    "game_id": "بازی {id}", "winner.pok": "پوک {v}",
}

JA: dict[str, str] = {
    "language": "日本語",
    "seat.P": "プレイヤー{n}", "seat.banker": "バンカー", "seat.burn": "バーン",
    "seat.flip": "フリップカード", "seat.short.P": "P{n}", "seat.short.banker": "B",
    "combo.ak_flush": "AK フラッシュ", "combo.special_pair": "スペシャルペア",
    "combo.face_card_combo": "絵柄カードコンボ",
    "combo.single_face_card_no_point": "0 点絵柄カードシングル",
    "combo.flush_no_point": "0 点フラッシュ",
    "flush": "フラッシュ", "pair": "ペア",
    "points.one": "1 点", "points": "{v} 点",
    "outcome.win": "勝ち", "outcome.lose": "負け", "outcome.tie": "引き分け",
    "odds": "{a}:{b}", "pair_won": "ペア",
    "bead.win": "勝", "bead.lose": "負", "bead.tie": "引",
    "legend.win": "プレイヤーが勝つ", "legend.lose": "プレイヤーが負ける", "legend.tie": "引き分け",
    "legend.flush": "外側の円: フラッシュ", "legend.pair": "黄色の点: ペア",
    "table": "テーブル {id}", "shoe": "シュー {n}", "no_shoe": "シューなし",
    "round": "ラウンド {n}", "round_settled": "ラウンド {n} 精算済み", "cards_left": "残り {n} 枚",
    "last_round": "最後のラウンド", "last_results": "最近の結果", "roadmap": "ロードマップ",
    "state.connecting": "接続中…", "state.starting": "起動中", "state.stopped": "テーブル停止",
    "state.no_shoe": "シューなし", "state.awaiting_flip": "新しいシュー",
    "state.burning": "バーン中", "state.ready": "準備完了", "state.betting": "ベット受付中",
    "state.dealing": "ベット締切", "state.revealing": "公開中", "state.paused": "一時停止",
    "clock.open": "ベット締切まで", "clock.frozen": "カウントダウン停止中",
    "clock.closed": "ベット締切", "clock.none": "ベット受付なし",
    "clock.seconds": "{n} 秒",
    "step.connecting": "テーブルに接続中…",
    "step.storage": "停止 — テーブルが記録できません — スーパーバイザーを呼んでください",
    "step.starting": "テーブル起動中", "step.stopped": "テーブル停止",
    "step.paused": "一時停止 — スーパーバイザーを呼んでください",
    "step.burn_one": "1 枚バーン",
    "step.deal": "{of} 枚中 {n} 枚目: {seat}、{which}",
    "step.deal_to": "{seat} にカードを配る",
    "card.first": "1 枚目", "card.second": "2 枚目",
    "step.all_dealt": "全カード配布済み — ベット締切を待つ",
    "step.new_shoe": "NEW SHOE を押す",
    "step.new_shoe_reconnect": "シュー未接続 — 接続してから NEW SHOE を押す",
    "step.flip": "フリップカードを引く", "step.burn_more": "あと {n} 枚バーン",
    "step.start_round": "START ROUND を押す",
    "step.start_round_last": "START ROUND を押す（このシューの最後のラウンド）",
    "step.start_round_reconnect": "シュー未接続 — START ROUND の前に接続する",
    "step.reveal": "{seat} の REVEAL を押す",
    "step.draining": "終了処理中: 停止しても安全です",
    "step.wait": "待機", "next_card": "次のカード",
    "banner.paused": "一時停止", "banner.way_out": "対処:",
    "banner.by": "停止した人: {who}", "by.supervisor": "スーパーバイザー {user}",
    "by.a_supervisor": "スーパーバイザー", "by.key": "キースイッチ",
    "by.storage": "テーブル（記録装置）", "by.fault": "テーブル（異常）",
    "banner.held": "保留中の入力 {n} 件",
    "fault.switch_pause": "スーパーバイザーのキースイッチが PAUSE です。",
    "way.switch_pause": "キーを RUN に戻してください。カウントダウンは残り時間から再開します。",
    "fault.supervisor_pause": "スーパーバイザーがテーブルを停止しました。",
    "way.supervisor_pause": "スーパーバイザーの再開を待ってください。",
    "fault.card_no_round": "ラウンドが開いていない時にカードが出ました。",
    "way.card_no_round": "カードを脇に置き、スーパーバイザーが再開します。",
    "fault.card_while_paused": "一時停止中にカードが出ました。",
    "way.card_while_paused": "カードを脇に置き、スーパーバイザーが再開またはラウンドを取り消します。",
    "fault.too_many_cards": "このラウンドでカードが 1 枚多く出ました。",
    "way.too_many_cards": "カードを脇に置き、スーパーバイザーが再開またはラウンドを取り消します。",
    "fault.ninth_copy": "シューに入っているはずのないカードを読み取りました。",
    "way.ninth_copy": "スーパーバイザーが実際のカードを入力するか、ラウンドを取り消します。",
    "fault.shoe_overdrawn": "シューの枚数より多くのカードが出ました。",
    "way.shoe_overdrawn": "ラウンドを取り消し、スーパーバイザーがシューを終了します。",
    "fault.misread": "シューがカードを読み取れませんでした。",
    "way.misread": "スーパーバイザーがカードを手入力するか、ラウンドを取り消します。",
    "fault.second_cut_card": "2 枚目のカットカードが出ました。",
    "way.second_cut_card": "脇に置いてください。スーパーバイザーが再開します。",
    "fault.cut_card_no_shoe": "シューが開いていない時にカットカードが出ました。",
    "way.cut_card_no_shoe": "脇に置いてください。スーパーバイザーが再開します。",
    "fault.unknown_shoe_frame": "シューから不明な信号が届きました（多くはカットカード）。",
    "way.unknown_shoe_frame": "スーパーバイザーを呼んでください。カットカードなら、このラウンドの後でシューを終了します。",
    "fault.shoe_lost": "シューの接続が切れました。",
    "way.shoe_lost": "シューを接続してください。スーパーバイザーが再開します。",
    "fault.journal_unwritable": "テーブルが記録できません（記録装置）。",
    "way.journal_unwritable": "配るのを止めてください。スーパーバイザーが記録装置を直して再開します。",
    "fault.journal_check_failed": "テーブルの記録の検査に失敗しました（変更または破損）。",
    "way.journal_check_failed": "配るのを止めてください。スーパーバイザーが記録を確認してから再開します。",
    "fault.controller_fault": "コントローラーが問題を報告しました。",
    "way.controller_fault": "スーパーバイザーを呼んでください。",
    "fault.fault": "問題によりテーブルが停止しました。",
    "way.fault": "スーパーバイザーを呼んでください。",
    "part.shoe": "カードシュー", "part.panel": "ボタンパネル", "part.key": "キースイッチ",
    "part.backend": "結果の送信先 {name}", "part.journal": "記録", "part.clock": "時計",
    "health.connected": "接続中", "health.not_connected": "未接続",
    "health.run": "RUN", "health.pause": "PAUSE",
    "health.up_to_date": "送信済み", "health.to_send": "{n} 件待ち",
    "health.unreachable": "到達不能", "health.retrying": "再試行中",
    "health.refused": "拒否", "health.no_subscriber": "受信者なし",
    "health.disconnected": "切断", "health.starting": "起動中",
    "health.no_status": "状態不明", "health.ok": "正常",
    "health.cannot_write": "書き込み不可", "health.check_failed": "検査失敗",
    "health.synced": "同期済み", "health.not_synced": "未同期", "health.unknown": "不明",
    "link.connecting": "接続中…", "link.live": "ライブ",
    "link.lost": "テーブルとの接続が切れました — 再接続中",
    "link.silent": "テーブルから応答がありません — 再接続中",
    "watch.head": "テーブル {id}", "watch.shoe": "シュー {n}", "watch.round": "ラウンド {n}",
    "watch.closes_in": "ベット締切まで {n} 秒", "watch.cards_left": "シュー残り {n} 枚",
    "watch.not_connected": "未接続: {names}",
    "watch.clock": "時計が同期していません — スーパーバイザーに伝えてください",
    "watch.unreachable": "バックエンド到達不能: {names}",
    "watch.held": "保留中の入力 {n} 件",
    # players' scoreboard (/scoreboard, /overlay): what happened and what it means for bets
    "notice.paused": "一時停止中 — ラウンドは続行、すべてのベットは有効です",
    "notice.misread": "カードを確認中 — ラウンドは続行、すべてのベットは有効です",
    "notice.cancelled": "ラウンド {n} はキャンセルされました — すべてのベットは返金されます",
    "call.place_bets": "ベットしてください", "call.no_more_bets": "ベット受付終了",
    "result.cancelled": "キャンセル — ベットは返金", "result.latest": "ラウンド {n}",
    "shuffling": "シャッフル中 — 新しいシュー",
    "shuffling.detail": "バーンの後、次のラウンドが始まります",
    "stats.title": "統計", "stats.rounds": "{n} ラウンド", "stats.cancelled": "キャンセル {n}",
    "stats.flushes": "フラッシュ", "stats.pairs": "ペア",
    "limits.title": "テーブルリミット", "limits.player": "プレイヤーベット", "limits.pair": "ペアベット",
    "paytable.title": "配当表",
    "pay.win": "プレイヤーの勝ち", "pay.win_pattern": "組み合わせでプレイヤーの勝ち",
    "pay.lose_pattern": "組み合わせでバンカーの勝ち", "pay.tie": "引き分け: ベットは返却",
    "pay.pair": "プレイヤーペアの勝ち",
    "pay.banker_06": "バンカー 0 点か 6 点: 組み合わせの勝ちは 1:1、8 点か 9 点でフラッシュかペアなら 2:1",
    "pay.pattern": "組み合わせ: フラッシュ、ペア、特別な組み合わせ",
    "game_id": "ゲーム {id}", "winner.pok": "ポック {v}",
}

CATALOGUE: dict[str, dict[str, str]] = {"en": EN, "fil": FIL, "ms": MS, "fa": FA, "ja": JA}

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def language(code: object) -> str:
    """A known language code (``fil``, ``ms``…), or ``en`` for anything else."""
    return code if isinstance(code, str) and code in CATALOGUE else "en"


def fault_key(status: Mapping[str, Any]) -> str:
    """The words' key for what stops the table (``fault.<key>``): its fault's code when the
    screens explain it, ``journal_unwritable`` for a storage fault, else ``fault``."""
    fault = status.get("fault")
    code = (fault.get("code") if isinstance(fault, Mapping) else None) or (
        "journal_unwritable" if status.get("storage_fault") else "fault")
    return code if code in FAULT_CODES else "fault"


def say(lang: str, key: str, **args: object) -> str:
    """The words for ``key`` in ``lang`` with its placeholders filled. A key the language
    lacks raises KeyError: the tests find it, a screen never shows English instead."""
    text = CATALOGUE[language(lang)][key]
    return _PLACEHOLDER.sub(lambda m: str(args.get(m.group(1), m.group(0))), text)


def seat_words(lang: str, seat: str) -> str:
    """``P3`` -> "Player 3" (Manlalaro 3, …); ``banker``, ``burn``, ``flip``."""
    if seat.startswith("P") and seat[1:].isdigit():
        return say(lang, "seat.P", n=seat[1:])
    return say(lang, f"seat.{seat}")


def step(status: Mapping[str, Any]) -> dict[str, Any]:
    """The dealer's next step as ``{"key": …, "args": {…}}`` (a seat as ``{"seat": "P2"}``,
    "which" as ``first``/``second``): the one source the pages and ``watch`` translate."""
    state = status.get("state")
    if status.get("storage_fault"):
        return {"key": "step.storage", "args": {}}
    if state in ("starting", "stopped"):
        return {"key": f"step.{state}", "args": {}}
    if status.get("paused"):
        return {"key": "step.paused", "args": {}}
    target = status.get("next_target")
    index = status.get("cards_dealt")
    if state in ("betting", "dealing") and isinstance(target, str):
        if target == "burn":
            return {"key": "step.burn_one", "args": {}}
        if isinstance(index, int) and not isinstance(index, bool) and index >= 1:
            which = "first" if index <= len(HAND_ORDER) else "second"
            return {"key": "step.deal", "args": {"n": index, "of": DEALT_PER_ROUND,
                                                 "seat": target, "which": which}}
        return {"key": "step.deal_to", "args": {"seat": target}}
    if status.get("betting_open") and target is None:
        return {"key": "step.all_dealt", "args": {}}
    if state in ("no_shoe", "ready") and status.get("drained"):
        return {"key": "step.draining", "args": {}}
    shoe_up = (status.get("devices") or {}).get("shoe", True) is not False
    if state == "no_shoe":
        return {"key": "step.new_shoe" if shoe_up else "step.new_shoe_reconnect", "args": {}}
    if state == "awaiting_flip":
        return {"key": "step.flip", "args": {}}
    if state == "burning":
        left = status.get("burn_remaining")
        if isinstance(left, int) and left > 0:
            return {"key": "step.burn_more", "args": {"n": left}}
        return {"key": "step.burn_one", "args": {}}
    if state == "ready":
        if not shoe_up:
            return {"key": "step.start_round_reconnect", "args": {}}
        return {"key": "step.start_round_last" if status.get("last_round")
                else "step.start_round", "args": {}}
    if state == "revealing":
        shown = len(status.get("hands") or {})
        if shown < len(HAND_ORDER):
            return {"key": "step.reveal", "args": {"seat": HAND_ORDER[shown]}}
    return {"key": "step.wait", "args": {}}


def step_words(lang: str, status: Mapping[str, Any]) -> str:
    """The dealer's next step in words: "deal card 7 of 12: Player 2, second card"."""
    return words_of(lang, step(status))


def words_of(lang: str, message: Mapping[str, Any]) -> str:
    """A ``{"key", "args"}`` message in ``lang`` (seats and "which" translated too)."""
    args = dict(message.get("args") or {})
    if isinstance(args.get("seat"), str):
        args["seat"] = seat_words(lang, args["seat"])
    if args.get("which") in ("first", "second"):
        args["which"] = say(lang, f"card.{args['which']}")
    return say(lang, str(message["key"]), **args)
