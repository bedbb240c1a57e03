"""Stands in for the quickstart tutorials' model.py (PyTorch's, TensorFlow's) where the
trials' Python has not that framework (expmgr's, not NNI's): the same NNI calls in the same
order, five epochs as theirs, and an "accuracy" in (0, 1) derived from the parameters
instead of trained. The tests copy it over model.py and say so."""
import json
import zlib

import nni

params = nni.get_next_parameter()
print(params)

# the same parameters give the same accuracy; it rises with each epoch
quality = zlib.crc32(json.dumps(params, sort_keys=True).encode()) / 2**32
epochs = 5
for t in range(epochs):
    accuracy = 0.5 + 0.3 * quality + 0.03 * t
    nni.report_intermediate_result(accuracy)
nni.report_final_result(accuracy)
