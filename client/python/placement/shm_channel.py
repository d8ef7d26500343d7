"""Messages between processes of one host through shared memory, for the multi-process runner.

gloo moves a CPU tensor between two processes of one host over a loopback TCP socket: the bytes are
copied into the kernel and out again by gloo's own threads, which on a machine with as many cores as
processes take those cores from the ops (measured on the 2-core development VM: a 1 MiB message keeps
the pair busy for ~1 ms, where copying it once takes ~0.1 ms). Here the sender packs a message straight
into memory the receiver maps, then writes its number to a pipe; the receiver reads the tensors where
they lie. That is one copy, made by the sender's computing thread, and no other thread.

    channels = SameHostChannels(token, rank, outbound={peer: [bytes, ...]}, inbound={peer: [bytes, ...]})
    channels.open_peers()           # after every process of the job has created its inbound side
    channels.forget_names()         # after every process has opened its outbound side
    view = channels.outbound(peer, k); ...pack into view...; channels.notify(peer, k)
    channels.wait(peer, k, timeout_s); view = channels.inbound(peer, k)

Layout: one region per direction of a pair, holding the messages of one step in the pair's agreed order
(message k at a fixed offset, 64-byte aligned), created by the receiver under /dev/shm with its space
reserved up front (posix_fallocate: a full tmpfs then fails here, at setup, not with SIGBUS in a step),
and a FIFO beside it that carries (step, k) pairs of 4-byte integers (writes under PIPE_BUF are atomic,
so two threads of a sender may notify at once). Each region is written once per step: a message's bytes
stay valid until the next step starts, which the runner opens with a barrier of every process, so a
receiver may use them in place for the whole step. The names are unlinked once every process has opened
them, so nothing is left behind when a process dies.
"""
import errno
import mmap
import os
import select
import struct

import torch

_ALIGN = 64
_NOTE = struct.Struct("<ii")
DIRECTORY = "/dev/shm"


class ChannelError(RuntimeError):
    """The shared-memory channel cannot be set up or a peer did not answer in time."""


def host_key():
    """What two processes compare to know they share a host (and so can share memory): the host name
    and the kernel's boot id (two containers of one pod share both; two machines never share the id)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{os.uname().nodename}/{boot}"


def usable():
    """Whether this host offers a tmpfs where processes can share memory (Linux's /dev/shm)."""
    return os.path.isdir(DIRECTORY) and os.access(DIRECTORY, os.W_OK | os.X_OK)


def layout(sizes):
    """(offsets, total bytes) of messages of `sizes` bytes packed in order at 64-byte boundaries."""
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += (max(int(size), 1) + _ALIGN - 1) // _ALIGN * _ALIGN
    return offsets, max(total, _ALIGN)


def _lies_in(tensor, regions):
    """Whether a CPU tensor's storage starts inside one of the open `regions`."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu":
        return False
    pointer = tensor.untyped_storage().data_ptr() if hasattr(tensor, "untyped_storage") \
        else tensor.storage().data_ptr()
    for region in regions:
        if region is not None and region.tensor is not None:
            base = region.tensor.data_ptr()
            if base <= pointer < base + region.size:
                return True
    return False


class _Region:
    def __init__(self, path, sizes, create):
        self.path = path
        self.offsets, self.size = layout(sizes)
        self.sizes = [int(s) for s in sizes]
        self.fifo, self.tensor = -1, None
        created = []  # what this call made, and only that, goes if it fails (the names may be another's)
        try:
            self._open(path, create, created)
        except BaseException:
            for name in created:
                try:
                    os.unlink(name)
                except OSError:
                    pass
            raise
        self.arrived = set()

    def _open(self, path, create, created):
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path + ".mem", flags, 0o600)
        if create:
            created.append(path + ".mem")
        try:
            if create:
                try:
                    os.posix_fallocate(fd, 0, self.size)
                except OSError as error:
                    raise ChannelError(f"cannot reserve {self.size} bytes of shared memory in {DIRECTORY} "
                                       f"({os.strerror(error.errno)}): give the container a larger /dev/shm, "
                                       f"or run with transport='gloo'") from error
            self.map = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        self.tensor = torch.frombuffer(self.map, dtype=torch.uint8)
        if create:
            os.mkfifo(path + ".fifo", 0o600)
            created.append(path + ".fifo")
        # The receiver opens its FIFO read-write: it then never sees end-of-file and never blocks opening;
        # the sender opens it write-only once the receiver has it open.
        self.fifo = os.open(path + ".fifo", os.O_RDWR if create else os.O_WRONLY)

    def view(self, k):
        return self.tensor[self.offsets[k]:self.offsets[k] + self.sizes[k]]

    def note(self, step, number):
        """Writes (step, number) to this region's FIFO (the sender's side)."""
        note = _NOTE.pack(step, number)
        if os.write(self.fifo, note) != len(note):
            raise ChannelError(f"a short write to the pipe {self.path}.fifo")

    def await_note(self, number, step, timeout_s):
        """Blocks until (step, number) has been read from this region's FIFO (the receiver's side); notes
        of other steps are dropped, those of this step kept in `arrived`. False when timeout_s passes."""
        while number not in self.arrived:
            ready, _, _ = select.select([self.fifo], [], [], timeout_s)
            if not ready:
                return False
            try:
                data = os.read(self.fifo, 4096 // _NOTE.size * _NOTE.size)
            except OSError as error:
                if error.errno in (errno.EAGAIN, errno.EINTR):
                    continue
                raise
            for offset in range(0, len(data) - len(data) % _NOTE.size, _NOTE.size):
                noted_step, noted = _NOTE.unpack_from(data, offset)
                if noted_step == step:
                    self.arrived.add(noted)
        return True

    def close(self):
        if self.fifo >= 0:
            os.close(self.fifo)
            self.fifo = -1
        self.tensor = None  # the map closes once no tensor viewing it is left


class SameHostChannels:
    """This process's shared-memory channels to the peers of its host (see the module docstring)."""

    def __init__(self, token, rank, outbound, inbound):
        """`outbound` / `inbound`: {peer rank: [bytes of each message of a step, in the pair's order]}.
        Creates the inbound regions (this process receives there); open_peers maps the outbound ones."""
        self.token, self.rank = token, rank
        self._outbound_sizes = {peer: list(sizes) for peer, sizes in outbound.items()}
        self.inbound_regions, self.outbound_regions = {}, {}
        self.step = 0
        try:
            for peer, sizes in sorted(inbound.items()):
                self.inbound_regions[peer] = _Region(self._path(peer, rank), sizes, create=True)
        except BaseException:
            self.close()
            raise

    def _path(self, source, destination):
        return os.path.join(DIRECTORY, f"placement-{self.token}-{source}-{destination}")

    def open_peers(self):
        for peer, sizes in sorted(self._outbound_sizes.items()):
            self.outbound_regions[peer] = _Region(self._path(self.rank, peer), sizes, create=False)

    def forget_names(self):
        """Unlinks this process's inbound names (every process has them open by now)."""
        for peer in self.inbound_regions:
            for suffix in (".mem", ".fifo"):
                try:
                    os.unlink(self._path(peer, self.rank) + suffix)
                except FileNotFoundError:
                    pass

    def begin_step(self, step):
        """A new step: message numbers restart (notes of another step are ignored)."""
        self.step = step & 0x7FFFFFFF
        for region in self.inbound_regions.values():
            region.arrived.clear()

    def outbound(self, peer, k):
        return self.outbound_regions[peer].view(k)

    def inbound(self, peer, k):
        return self.inbound_regions[peer].view(k)

    def notify(self, peer, k):
        self.outbound_regions[peer].note(self.step, k)

    def wait(self, peer, k, timeout_s):
        """Blocks until message k of this step from `peer` has been written."""
        if not self.inbound_regions[peer].await_note(k, self.step, timeout_s):
            raise ChannelError(f"no message from process {peer} within {timeout_s:g} s (message {k})")

    def contains(self, tensor):
        """Whether `tensor` lies in memory a peer writes (what must be copied before it outlives a step)."""
        return _lies_in(tensor, self.inbound_regions.values())

    def close(self):
        for region in list(self.inbound_regions.values()) + list(self.outbound_regions.values()):
            region.close()
        self.forget_names()
        self.inbound_regions, self.outbound_regions = {}, {}


class SameHostRing:
    """An all-reduce among processes of one host through shared memory, for the runner's replica rings.

    A reduce-scatter into one result every member reads in place. Each member writes its part of item i
    (a gradient tensor) into its own region, which every other member maps, and notes it on each other
    member's pipe; once it has every part, member j sums slice j of the elements (the parts in ring order,
    position 0 first, then divided as asked) into the result region, which member 0 creates and all map,
    and notes that. Once every slice is noted the item's result is whole, the same bits for every member.
    Per member and item of n bytes: one copy in, reads of n, n / size written — against a read of every
    part and n written by each member were each to sum it all, or gloo's copies and threads. Regions hold
    each item once per step (the runner's step barrier orders a rewrite after every read, as for
    messages), so a result may be used in place until the next step starts.

        ring = SameHostRing(token, position, members, sizes)   # members: ranks in ring order
        ring.open_peers(); ring.forget_names()                  # after every member created its regions
        ring.begin_step(step)
        ring.contribute(i, tensor)                               # copies in, notes the others
        total = ring.total(i, dtype, shape, timeout_s, divide_by=size)   # waits; the result, in place
    """

    def __init__(self, token, position, members, sizes):
        self.token, self.position, self.members = token, position, list(members)
        self.sizes = list(sizes)
        self.step = 0
        self.own = self.result = None
        self.peers = {}
        self._created = []  # the names this member made (and only those may it unlink)
        try:
            self.own = _Region(self._path(position), self.sizes, create=True)
            self._created.append(self._path(position))
            if position == 0:
                self.result = _Region(self._path(0) + "-sum", self.sizes, create=True)
                self._created.append(self._path(0) + "-sum")
        except BaseException:
            self.close()
            raise

    def _path(self, position):
        return os.path.join(DIRECTORY, f"placement-{self.token}-ring-{self.members[position]}")

    def open_peers(self):
        for j in range(len(self.members)):
            if j != self.position:
                self.peers[j] = _Region(self._path(j), self.sizes, create=False)
        if self.result is None:
            self.result = _Region(self._path(0) + "-sum", self.sizes, create=False)

    def forget_names(self):
        for name in self._created:
            for suffix in (".mem", ".fifo"):
                try:
                    os.unlink(name + suffix)
                except FileNotFoundError:
                    pass

    def begin_step(self, step):
        self.step = step & 0x7FFFFFFF
        self.own.arrived.clear()

    def _number(self, item, phase, position):
        return (item * 2 + phase) * len(self.members) + position

    def _note(self, item, phase):
        for region in self.peers.values():
            region.note(self.step, self._number(item, phase, self.position))

    def _wait(self, item, phase, timeout_s):
        for j in self.peers:
            if not self.own.await_note(self._number(item, phase, j), self.step, timeout_s):
                what = "part" if phase == 0 else "sum"
                raise ChannelError(f"no {what} of all-reduce item {item} from process {self.members[j]} "
                                   f"within {timeout_s:g} s")

    def contribute(self, item, tensor):
        view = self.own.view(item)
        view.view(tensor.dtype).view(tensor.shape).copy_(tensor)
        self._note(item, 0)

    def total(self, item, dtype, shape, timeout_s, divide_by=None):
        """The sum of every member's part of `item` (divided by `divide_by`), as a view of the shared
        result: valid until the next step starts."""
        size = len(self.members)
        self._wait(item, 0, timeout_s)
        result = self.result.view(item).view(dtype)
        count = result.numel()
        lo, hi = count * self.position // size, count * (self.position + 1) // size
        if hi > lo:
            parts = [(self.own if j == self.position else self.peers[j]).view(item).view(dtype)[lo:hi]
                     for j in range(size)]
            out = result[lo:hi]
            if size > 1:
                torch.add(parts[0], parts[1], out=out)
            else:
                out.copy_(parts[0])
            for part in parts[2:]:
                out.add_(part)
            if divide_by is not None:
                out.div_(divide_by)
        self._note(item, 1)
        self._wait(item, 1, timeout_s)
        return result.view(shape)

    def contains(self, tensor):
        """Whether `tensor` lies in the ring's shared memory (what must be copied to outlive a step)."""
        return _lies_in(tensor, [self.own, self.result] + list(self.peers.values()))

    def close(self):
        for region in [self.own, self.result] + list(self.peers.values()):
            if region is not None:
                region.close()
        self.forget_names()
        self.peers = {}
