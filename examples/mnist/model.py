"""An MNIST-like model file for `recprep prepare`.

The data-preparation job needs two things from the model file you train with:
`feature_columns` (what each instance holds) and `prepare_data_for_a_single_file`.
Feature columns may also be TensorFlow ones, e.g.
`tf.feature_column.numeric_column("image", shape=(28, 28))`.
"""

import os

import numpy as np

from recprep import Feature

feature_columns = [
    Feature("image", "float32", (28, 28)),
    Feature("label", "int64"),
]


def prepare_data_for_a_single_file(filename):
    """One raw file -> one instance: a 28x28 image scaled to [0, 1] and its label.

    Files live in folders named after their label: raw/<split>/digit_<label>/<id>.npy.
    """
    image = np.load(filename).astype(np.float32) / 255.0
    label = int(os.path.basename(os.path.dirname(filename)).split("_")[1])
    return image, label
