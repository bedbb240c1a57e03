# Copyright (c) Microsoft Corporation.
# Licensed under the MIT license.

from .demo_tuner import DemoTuner, MyClassArgsValidator
