"""Table time: the clock the table runs on (table_clock: steady while a countdown runs, never
backwards), the watch that notices a stepped wall clock (watch), and the kernel's word on
synchronisation (time_sync).
"""
