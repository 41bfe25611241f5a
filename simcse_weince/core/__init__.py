"""The core every library may use, importing none of them: where data and models come from (``paths``,
``model_sources``), reading and writing files (``textfiles``, ``file_errors``, ``file_modes``, ``atomic``, ``digests``,
``strict_json``), the settings checker (``checks``, ``setting_changes``), the machine (``devices``, ``hardware``,
``memory``) and how a stopped run ends (``stopping``)."""
