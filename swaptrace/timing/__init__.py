"""The time model (``swaptrace time``): a swap I/O stream priced on an SSD model or a measured device
profile (``model``), the host's fault costs measured (``calibrate``) and a device profile read off a
``fio run`` folder (``device_profile``).
"""
