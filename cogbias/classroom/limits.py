"""What the participant server allows one network address, and what it counts instead of
logging (docs/teaching.md, "What the server limits").

A room's phones often share one address (a school's Wi-Fi behind one NAT), so the limits are
per address and sized for a class: 60 can join at once, and more keep joining at 4 a second.
A client that drops its cookie to come back as someone new is held to the same pace, which
bounds how far it can move a result. Addresses live in memory only, at most `MAX_ADDRESSES`
of them, and are never stored, printed or logged: the terminal gets counts.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable

JOIN_BURST = 60  # new participants one address may bring at once (a class behind one NAT)
JOIN_RATE = 4.0  # then this many a second
ANSWER_BURST = 60  # answers one address may send at once
ANSWER_RATE = 4.0  # then this many a second
MAX_ADDRESSES = 10_000  # addresses remembered; the longest unseen is forgotten first


class Buckets:
    """A token bucket per address: `burst` tokens, refilled at `rate` a second; a request
    takes one or is refused. Safe to call from the server's database threads."""

    def __init__(
        self, burst: int, rate: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst, self.rate, self.clock = float(burst), rate, clock
        self._levels: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def _level(self, address: str, at: float) -> float:
        level, then = self._levels.get(address, (self.burst, at))
        return min(self.burst, level + (at - then) * self.rate)

    def take(self, address: str) -> bool:
        """One request from `address`: True when it may go ahead."""
        with self._lock:
            at = self.clock()
            level = self._level(address, at)
            allowed = level >= 1.0
            self._levels[address] = (level - 1.0 if allowed else level, at)
            self._levels.move_to_end(address)
            while len(self._levels) > MAX_ADDRESSES:
                self._levels.popitem(last=False)
            return allowed

    def wait(self, address: str) -> int:
        """Whole seconds until `address` may send one more (for Retry-After)."""
        with self._lock:
            missing = 1.0 - self._level(address, self.clock())
        return max(1, int(missing / self.rate) + 1) if missing > 0 else 1


def client_address(peer: str | None, forwarded: str | None) -> str:
    """The address a request counts against: the connection's peer, or, when the peer is
    this machine (a reverse proxy on it, as docs/teaching.md sets up), the last address of
    X-Forwarded-For, which that proxy added. An IPv6 address counts as its /64 network
    (one household or phone can hold the whole of one)."""
    text = peer or ""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    if address.is_loopback and forwarded:
        try:
            address = ipaddress.ip_address(forwarded.split(",")[-1].strip())
        except ValueError:
            pass
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


TOO_FAST = "requests refused as too fast"
MALFORMED = "malformed requests refused"
BUSY = "replies 'busy, try again' (database locked)"
EVICTED = "connections closed to make room"
IDLE_CLOSED = "connections closed as idle or half-sent"
TIMED_OUT = "answers refused as sent too slowly"
ERRORS = "internal errors"


class Tally:
    """Counts of what the server refused, printed as one line now and then (never an
    address), and the refusals as too fast per session, written to the store for the
    teacher's page."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._shown: Counter[str] = Counter()
        self._sessions: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, kind: str, session: str | None = None) -> None:
        with self._lock:
            self._counts[kind] += 1
            if session is not None and kind == TOO_FAST:
                self._sessions[session] += 1

    def total(self, kind: str) -> int:
        with self._lock:
            return self._counts[kind]

    def take_sessions(self) -> dict[str, int]:
        """The refusals as too fast per session since last taken (then forgotten here)."""
        with self._lock:
            taken = dict(self._sessions)
            self._sessions.clear()
            return taken

    def give_back(self, counts: dict[str, int]) -> None:
        """Counts that could not be written (the database was busy): kept for the next try."""
        with self._lock:
            self._sessions.update(counts)

    def news(self) -> str | None:
        """What was counted since the last call, as one line; None when nothing was."""
        with self._lock:
            new = self._counts - self._shown
            self._shown = Counter(self._counts)
        if not new:
            return None
        return "class server: " + "; ".join(f"{n} {kind}" for kind, n in sorted(new.items()))
