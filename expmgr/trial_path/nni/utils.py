"""``nni.utils.merge_parameter``, as NNI 3.0 defines it (parameters over argparse defaults)."""


def merge_parameter(base_params, override_params):
    """Update ``base_params`` (a dict or a namespace) in place with ``override_params`` (a
    dict, or None for no change) and return it; a key missing from ``base_params``, or a
    value of another type than the one it replaces (an int may replace a float), is a
    ValueError."""
    if override_params is None:
        return base_params
    is_dict = isinstance(base_params, dict)
    for key, value in override_params.items():
        if is_dict:
            if key not in base_params:
                raise ValueError("Key '%s' not found in base parameters." % key)
            base_params[key] = _ensure_compatible_type(key, base_params[key], value)
        else:
            if not hasattr(base_params, key):
                raise ValueError("Key '%s' not found in base parameters." % key)
            setattr(base_params, key, _ensure_compatible_type(key, getattr(base_params, key), value))
    return base_params


def _ensure_compatible_type(key, base, override):
    if base is None or isinstance(override, type(base)):
        return override
    if isinstance(base, float) and isinstance(override, int):
        return float(override)
    raise ValueError(f'Expected "{key}" in override parameters to have type {type(base).__name__}, '
                     f"but found {type(override).__name__}")
