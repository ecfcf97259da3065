"""ASTRA-sim in one place: the export (export.py, serial_chain.py), the consumer
model (consumer.py, collective.py), its rules for validate (rules.py), the
runner of a real binary (binary.py) and the API of both commands (api.py)."""
