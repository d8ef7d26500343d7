"""Tests of placement.shm_channel, the shared-memory messages of the multi-process runner: both ends of a
pair in one process (the runner's two-process use is in test_torch_dist.py), in a temporary folder
instead of /dev/shm so that the names it leaves (none) can be checked."""
import os
import threading

import pytest

torch = pytest.importorskip("torch")

from placement import shm_channel  # noqa: E402


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(shm_channel, "DIRECTORY", str(tmp_path))
    return tmp_path


def pair(sizes_0_to_1, sizes_1_to_0, token="t"):
    """Ranks 0 and 1, set up as the runner does: both create their inbound side, then open the other's."""
    zero = shm_channel.SameHostChannels(token, 0, outbound={1: sizes_0_to_1}, inbound={1: sizes_1_to_0})
    one = shm_channel.SameHostChannels(token, 1, outbound={0: sizes_1_to_0}, inbound={0: sizes_0_to_1})
    zero.open_peers()
    one.open_peers()
    zero.forget_names()
    one.forget_names()
    return zero, one


def test_layout_aligns_every_message_to_64_bytes():
    assert shm_channel.layout([1, 64, 65, 0]) == ([0, 64, 128, 256], 320)
    assert shm_channel.layout([]) == ([], 64)


def test_messages_arrive_in_place_in_any_order_and_no_name_is_left(folder):
    zero, one = pair([8, 100, 4096], [16])
    assert os.listdir(folder) == []  # unlinked once both sides had them open
    payloads = [torch.arange(8, dtype=torch.uint8), torch.full((100,), 7, dtype=torch.uint8),
                torch.randint(0, 255, (4096,), dtype=torch.uint8)]
    for step in range(3):  # a region is rewritten every step
        zero.begin_step(step)
        one.begin_step(step)
        for k in (2, 0, 1):
            zero.outbound(1, k).copy_(payloads[k] + step)
            zero.notify(1, k)
        for k in (0, 1, 2):
            one.wait(0, k, timeout_s=5)
            assert torch.equal(one.inbound(0, k), payloads[k] + step)
        one.outbound(0, 0).fill_(step)
        one.notify(0, 0)
        zero.wait(1, 0, timeout_s=5)
        assert torch.equal(zero.inbound(1, 0), torch.full((16,), step, dtype=torch.uint8))
    zero.close()
    one.close()


def test_a_note_of_another_step_does_not_count_and_a_missing_message_times_out(folder):
    zero, one = pair([8, 8], [8])
    zero.begin_step(4)
    zero.notify(1, 1)  # written in step 4, read in step 5: stale
    one.begin_step(5)
    with pytest.raises(shm_channel.ChannelError, match="no message from process 0 within 0.2 s"):
        one.wait(0, 1, timeout_s=0.2)
    # A waiting receiver wakes when the sender writes (another thread here, another process in a run).
    zero.begin_step(5)
    writer = threading.Timer(0.05, lambda: (zero.outbound(1, 1).fill_(3), zero.notify(1, 1)))
    writer.start()
    one.wait(0, 1, timeout_s=5)
    writer.join()
    assert torch.equal(one.inbound(0, 1), torch.full((8,), 3, dtype=torch.uint8))
    zero.close()
    one.close()


def test_contains_tells_received_memory_from_a_process_own(folder):
    zero, one = pair([32], [32])
    received = one.inbound(0, 0).view(torch.float32)[2:4]
    assert one.contains(received)
    assert not one.contains(received.clone())
    assert not zero.contains(received)  # rank 0 writes there; it receives elsewhere
    zero.close()
    one.close()


def test_a_region_that_cannot_be_created_leaves_nothing_behind(folder):
    first = shm_channel.SameHostChannels("same", 1, outbound={}, inbound={0: [8]})
    # The same names again (another job with the same token): refused, and the first keeps its files.
    with pytest.raises(FileExistsError):
        shm_channel.SameHostChannels("same", 1, outbound={}, inbound={0: [8]})
    assert sorted(os.listdir(folder)) == ["placement-same-0-1.fifo", "placement-same-0-1.mem"]
    first.close()
    assert os.listdir(folder) == []
    # A peer whose side was never created cannot be opened.
    lonely = shm_channel.SameHostChannels("lonely", 0, outbound={1: [8]}, inbound={})
    with pytest.raises(FileNotFoundError):
        lonely.open_peers()
    lonely.close()
    assert os.listdir(folder) == []


def test_host_key_names_this_boot():
    key = shm_channel.host_key()
    assert key.startswith(os.uname().nodename + "/") and key == shm_channel.host_key()


def test_a_ring_sums_every_members_part_in_ring_order_the_same_in_every_member(folder):
    members = [5, 7, 9]  # ranks, in ring order
    sizes = [4 * 7, 4 * 3]  # two float32 items (7 elements: slices of 2, 2 and 3)
    rings = [shm_channel.SameHostRing("r", i, members, sizes) for i in range(3)]
    for ring in rings:
        ring.open_peers()
    for ring in rings:
        ring.forget_names()
    assert os.listdir(folder) == []
    parts = [torch.tensor([1e8, 1.0, -1e8, 0.5, 2.0, 3.0, 7.0]) * (i + 1) for i in range(3)]
    for step in range(2):
        for ring, part in zip(rings, parts):
            ring.begin_step(step)
            ring.contribute(0, part + step)
        # Every member sums its slice, then waits for the others' (threads here, processes in a run).
        totals = [None] * 3

        def total(i):
            totals[i] = rings[i].total(0, torch.float32, (7,), timeout_s=5, divide_by=3)

        threads = [threading.Thread(target=total, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expected = ((parts[0] + step) + (parts[1] + step) + (parts[2] + step)) / 3  # ring order
        for i, result in enumerate(totals):
            assert torch.equal(result, expected)  # bit for bit, in every member
            assert rings[i].contains(result)  # the shared result, read in place
            assert not rings[i].contains(result.clone())
    # An item only rank 5 contributed to yet: a wait names a member still missing.
    rings[0].contribute(1, torch.ones(3))
    with pytest.raises(shm_channel.ChannelError, match="no part of all-reduce item 1 from process 9"):
        rings[1].total(1, torch.float32, (3,), timeout_s=0.2)
    # Every part there, but the others have not summed their slices: the wait names one of them.
    rings[1].contribute(1, torch.ones(3))
    rings[2].contribute(1, torch.ones(3))
    with pytest.raises(shm_channel.ChannelError, match="no sum of all-reduce item 1 from process (7|9)"):
        rings[0].total(1, torch.float32, (3,), timeout_s=0.2)
    for ring in rings:
        ring.close()
    assert os.listdir(folder) == []


def test_a_full_shared_memory_is_refused_at_set_up_with_nothing_left(folder, monkeypatch):
    """A container's /dev/shm is often 64 MB: a step whose messages do not fit fails here, at set-up
    (the runner then keeps gloo), never with SIGBUS when a step writes past what tmpfs could give."""
    import errno

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shm_channel.os, "posix_fallocate", full)
    with pytest.raises(shm_channel.ChannelError, match="cannot reserve 128 bytes of shared memory"):
        shm_channel.SameHostChannels("full", 1, outbound={}, inbound={0: [100]})
    with pytest.raises(shm_channel.ChannelError, match="larger /dev/shm"):
        shm_channel.SameHostRing("full", 0, [3, 4], [8])
    assert os.listdir(folder) == []
