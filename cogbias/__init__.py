"""cogbias: see, teach and measure cognitive biases in large language models."""

__version__ = "0.1.0"
