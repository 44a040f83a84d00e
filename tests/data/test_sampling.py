"""Training orders: re-sampling toward rare targets, and shuffled passes."""
import numpy as np
import pytest

from knn.data.sampling import ResamplingSampler, ShuffledPasses


def test_buckets_with_negative_and_zero_targets():
    y = [-3.0, -0.01, 0.0, 0.04, 0.05, 0.12, 5.0, 5.01]
    s = ResamplingSampler(y, bin_width=0.05)
    assert s.bucket_keys.tolist() == [0, 1, 2, 100]  # [0, .05): four of them (negatives clipped to 0)
    assert sorted(s.members[0].tolist()) == [0, 1, 2, 3] and sorted(s.members[3].tolist()) == [6, 7]
    raw = ResamplingSampler(y, bin_width=0.05, floor=None)
    assert raw.bucket_keys.tolist() == [-60, -1, 0, 1, 2, 100]


def test_draws_are_uniform_over_buckets_and_cycle_within_a_bucket():
    y = np.array([0.01] * 90 + [1.0] * 9 + [9.0])  # one common, two rare buckets
    s = ResamplingSampler(y, num_samples=3000, seed=0)
    idx = s.epoch_indices(0)
    share = np.bincount(np.digitize(y[idx], [0.5, 5.0]), minlength=3) / len(idx)
    assert np.allclose(share, 1 / 3, atol=0.05)
    rare = [i for i in idx if y[i] == 1.0][:18]
    assert rare[:9] == rare[9:] and sorted(rare[:9]) == list(range(90, 99))  # fixed cyclic order


def test_epochs_are_a_function_of_seed_and_epoch():
    y = np.random.RandomState(0).uniform(-1, 10, size=500)
    a = ResamplingSampler(y, seed=3)
    stream = np.concatenate([a.epoch_indices(e) for e in range(4)])
    b = ResamplingSampler(y, seed=3)
    assert (b.epoch_indices(3) == stream[1500:]).all()  # resumed at epoch 3, without replaying by hand
    assert (b.batch(2, 4, 20) == stream[1000 + 80 : 1000 + 100]).all()
    b.set_epoch(1)
    assert list(b) == stream[500:1000].tolist() and len(b) == 500
    assert not (ResamplingSampler(y, seed=4).epoch_indices(0) == stream[:500]).all()


def test_sampler_rejects_bad_input():
    with pytest.raises(ValueError, match="bin_width"):
        ResamplingSampler([1.0], bin_width=0)
    with pytest.raises(ValueError, match="non-empty"):
        ResamplingSampler([])


def test_shuffled_passes_cover_every_item_once_per_pass():
    stream = ShuffledPasses(num_items=10, num_samples=25, seed=3)
    drawn = np.concatenate([stream.batch(e, i, 5) for e in range(2) for i in range(5)])  # 50 draws
    for k in range(5):
        assert sorted(drawn[10 * k : 10 * k + 10].tolist()) == list(range(10))
    again = ShuffledPasses(num_items=10, num_samples=25, seed=3)
    assert (again.batch(1, 2, 5) == drawn[35:40]).all()  # a function of (seed, epoch, index)
