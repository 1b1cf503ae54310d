// Work in progress: see the issue for this layer.
