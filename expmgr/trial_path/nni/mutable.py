"""NNI 3.0's search-space shortcuts (``nni.choice``, ``nni.uniform``, ...), without NNI.

They build the objects NNI 3.0's build (``Categorical``, ``Numerical``: the same
constructor arguments, attributes, ``repr`` and checks), which describe one parameter::

    nni.choice('x', [1, 2, 3]).as_legacy_dict()   # {'_type': 'choice', '_value': [1, 2, 3]}

As in NNI 3.0, only a ``Categorical`` has a search-space dict (``as_legacy_dict``); a
``Numerical`` raises NotImplementedError there. Standard library only, Python 3.8+.
"""
import logging

__all__ = ["Categorical", "Numerical", "choice", "uniform", "quniform", "loguniform", "qloguniform", "normal",
           "qnormal"]

_logger = logging.getLogger(__name__)


class Categorical:
    """Choosing one of ``values`` (unique, not empty)."""

    def __init__(self, values, *, label=None):
        values = list(values)
        assert values, 'Categorical values must not be empty.'
        for i in range(len(values)):
            for j in range(i + 1, len(values)):
                assert values[i] != values[j], f'Discrete values must be unique, but {i} collides with {j}.'
        self.values = values
        self.label = label

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        if len(self.values) <= 7:
            return f'Categorical({self.values!r}, label={self.label!r})'
        return ('Categorical([' + ', '.join(map(repr, self.values[:3])) + ', ..., '
                + ', '.join(map(repr, self.values[-3:])) + f'], label={self.label!r})')

    def as_legacy_dict(self):
        """The search-space entry of this parameter, as NNI 3.0 writes it."""
        return {'_type': 'choice', '_value': self.values}


class Numerical:
    """A number drawn from ``[low, high]`` (uniform, or log-uniform) or from a normal
    distribution (``mu``, ``sigma``), rounded to a multiple of ``quantize`` when given."""

    def __init__(self, low=float('-inf'), high=float('inf'), *, mu=None, sigma=None, log_distributed=False,
                 quantize=None, label=None):
        self.quantize = quantize
        self.low = low
        self.high = high
        self.mu = mu
        self.sigma = sigma
        self.log_distributed = log_distributed
        self.label = label

    def __repr__(self):
        shown = f'{self.low}, {self.high}, '
        if self.mu is not None and self.sigma is not None:
            shown += f'mu={self.mu}, sigma={self.sigma}, '
        if self.quantize is not None:
            shown += f'q={self.quantize}, '
        if self.log_distributed:
            shown += 'log_distributed=True, '
        return f'Numerical({shown}label={self.label!r})'

    def as_legacy_dict(self):
        raise NotImplementedError(f'as_legacy_dict is not implemented for this type of mutable: {type(self)}.')


def choice(label, choices):
    """One of ``choices``: ``Categorical(choices, label=label)``."""
    return Categorical(choices, label=label)


def uniform(label, low, high):
    if low >= high:
        raise ValueError('low must be strictly smaller than high.')
    return Numerical(low, high, label=label)


def quniform(label, low, high, quantize):
    if isinstance(quantize, int):
        _logger.warning('Though quantize is an integer (%d) in quniform, the returned value will always be float. '
                        'Use `nni.choice` for integer values.', quantize)
    if low >= high:
        raise ValueError('low must be strictly smaller than high.')
    return Numerical(low, high, quantize=quantize, label=label)


def loguniform(label, low, high):
    if low >= high:
        raise ValueError('low must be strictly smaller than high.')
    if low <= 0 or high <= 0:
        raise ValueError('low and high must be strictly greater than 0.')
    return Numerical(low, high, log_distributed=True, label=label)


def qloguniform(label, low, high, quantize):
    return Numerical(low, high, log_distributed=True, quantize=quantize, label=label)


def normal(label, mu, sigma):
    if sigma <= 0:
        raise ValueError('Standard deviation must be strictly greater than 0.')
    return Numerical(mu=mu, sigma=sigma, label=label)


def qnormal(label, mu, sigma, quantize):
    if sigma <= 0:
        raise ValueError('Standard deviation must be strictly greater than 0.')
    return Numerical(mu=mu, sigma=sigma, quantize=quantize, label=label)
