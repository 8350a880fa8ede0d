"""zring's internals, in modules named for what they hold: ``dataset`` (the
:class:`zring.Dataset` class), ``loader`` and ``sampler_loader`` (the loaders),
``write`` (``write_dataset`` and field schemas), ``pack`` (sequence packing),
``ragged`` (``RaggedBatch``), ``errors`` (the exception classes), ``export`` (Arrow
and Parquet export), ``frameworks`` (what the torch and JAX adapters share: the
epoch plan and field opening) and ``cli`` (the ``zring`` console script).

Nothing here is public: import from :mod:`zring` and its public modules
(``zring.torch``, ``zring.jax``, ``zring.ray``, ``zring.converters``,
``zring.loaderx``, ``zring.types``). These modules may move between releases.
"""
