"""Stands in for the PyTorch quickstart tutorials' model.py where torch is not installed
(expmgr's, not NNI's): the same NNI calls in the same order, with the same hyperparameters
and five epochs, and an "accuracy" computed from the parameters instead of trained. The
tests copy it over model.py; its trial API calls are what the experiment sees."""
import math

import nni

params = {
    'features': 512,
    'lr': 0.001,
    'momentum': 0,
}
optimized_params = nni.get_next_parameter()
params.update(optimized_params)
print(params)

epochs = 5
for t in range(epochs):
    # better with more features and an lr near 0.01; rises with each epoch, stays in (0, 1)
    closeness = 1 / (1 + abs(math.log10(params['lr']) + 2))
    accuracy = 0.5 * closeness + 0.1 * math.log2(params['features']) / 10 + 0.05 * t + 0.1 * params['momentum']
    accuracy = min(accuracy, 0.99)
    nni.report_intermediate_result(accuracy)
nni.report_final_result(accuracy)
