"""The remote training service (NNI's ``platform: remote``): trials on the user's hosts over SSH."""
