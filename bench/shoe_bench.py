"""Shoe figures: parser throughput, card-to-input latency over a real pty, unplug/replug
detection times, and a whole 8-deck shoe through the driver. Prints one line per figure.

    python bench/shoe_bench.py [--cards N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone: bench.measuring

from bench.measuring import TimedSink
from controller.rules.cards import ALL_CARDS
from controller.table.inputs import DeviceStatus
from drivers.protocols.beetek import BeeTekEncoder, BeeTekParser
from drivers.protocols.pdt import PdtEncoder, PdtParser
from drivers.protocols.rfid import RfidEncoder, RfidParser, simulated_registry, simulated_uid
from drivers.shoe import SerialShoe
from drivers.sim.shoe import ShoeSimulator, shuffled_shoe


def is_shoe_input(inp: object) -> bool:
    return not isinstance(inp, DeviceStatus)


def parser_throughput() -> None:
    codes = [c.code for c in ALL_CARDS] * 40
    streams = {
        "beetek": (BeeTekParser, b"".join(BeeTekEncoder().card(c) for c in codes)),
        "rfid": (lambda: RfidParser(simulated_registry(40)),
                 b"".join(RfidEncoder().tag(simulated_uid(i)) for i in range(len(codes)))),
        "pdt": (PdtParser, b"".join(PdtEncoder().card(c) for c in codes)),
    }
    for name, (make, data) in streams.items():
        parser = make()
        start = time.perf_counter()
        for offset in range(0, len(data), 64):  # 64-byte reads, like a busy serial port
            parser.feed(data[offset:offset + 64])
        took = time.perf_counter() - start
        print(f"parser {name}: {len(codes) / took:,.0f} frames/s, "
              f"{len(data) / took / 1e6:.2f} MB/s ({len(data) / len(codes):.0f} bytes/frame; "
              f"a 115200-baud line carries at most {11520 / (len(data) / len(codes)):,.0f} "
              f"frames/s)")


def pty_latency(protocol: str, cards: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "shoe"
        sink = TimedSink(time.perf_counter)
        with ShoeSimulator(link, protocol, decks=8) as sim:
            options = {"url": str(link), "protocol": protocol, "reconnect_seconds": 0.05}
            if protocol == "rfid":
                options["registry"] = str(sim.registry_path)
            with SerialShoe(sink, options):
                sim.send_card("AS")  # waits for the driver to open the port
                sink.wait_for(is_shoe_input, 1)
                latencies = []
                for index, card in enumerate(shuffled_shoe(1, 8)[1:cards + 1], start=2):
                    sent = time.perf_counter()
                    sim.send_card(card)
                    latencies.append(sink.wait_for(is_shoe_input, index) - sent)
                latencies.sort()
                ms = [x * 1000 for x in latencies]
                print(f"pty card->input {protocol}: median {statistics.median(ms):.2f} ms, "
                      f"p99 {ms[int(len(ms) * 0.99) - 1]:.2f} ms, max {ms[-1]:.2f} ms "
                      f"({cards} cards)")

                # unplug/replug detection (driver retry period 50 ms)
                start = time.perf_counter()
                sim.unplug()
                lost = sink.wait_for(lambda i: isinstance(i, DeviceStatus)
                                       and not i.connected, 1)
                replug = time.perf_counter()
                sim.replug()
                back = sink.wait_for(lambda i: isinstance(i, DeviceStatus) and i.connected, 2)
                print(f"unplug->connected:false {protocol}: {(lost - start) * 1000:.1f} ms "
                      f"(includes the simulator's drain wait of 100 ms); replug->connected:true "
                      f"{(back - replug) * 1000:.1f} ms (retry period 50 ms)")


def whole_shoe(protocol: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "shoe"
        sink = TimedSink(time.perf_counter)
        cards = shuffled_shoe(9, 8)
        with ShoeSimulator(link, protocol, decks=8) as sim:
            options = {"url": str(link), "protocol": protocol}
            if protocol == "rfid":
                options["registry"] = str(sim.registry_path)
            with SerialShoe(sink, options):
                sim.send_card(cards[0])
                sink.wait_for(is_shoe_input, 1)
                start = time.perf_counter()
                for card in cards[1:]:
                    sim.send_card(card)
                end = sink.wait_for(is_shoe_input, len(cards))
        got = [i.card for _, i in sink.arrivals if is_shoe_input(i)]
        assert got == cards, "cards lost or reordered"
        print(f"whole 8-deck shoe {protocol}: {len(cards) - 1} cards back to back in "
              f"{(end - start) * 1000:.0f} ms, none lost")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cards", type=int, default=300)
    args = parser.parse_args()
    parser_throughput()
    for protocol in ("beetek", "rfid", "pdt"):
        pty_latency(protocol, args.cards)
    for protocol in ("beetek", "rfid", "pdt"):
        whole_shoe(protocol)


if __name__ == "__main__":
    main()
