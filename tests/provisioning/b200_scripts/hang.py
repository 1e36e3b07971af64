"""Never makes an optimizer step: it sleeps until it is stopped."""

import time

print("hang.py: sleeping until stopped", flush=True)
while True:
    time.sleep(60)
