import pytest
from tests.browser.test_staff import seed, PASSWORDS, log_in  # noqa
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

JS = """() => { const out=[]; for (const el of document.querySelectorAll('*')) { const b=el.getBoundingClientRect();
 let inside=false; for (let up=el.parentElement; up && up!==document.body; up=up.parentElement) if (getComputedStyle(up).overflowX!=='visible') inside=true;
 if (b.right > 391 && b.width>0 && !inside) out.push(el.tagName.toLowerCase()+(el.id?'#'+el.id:'')+'.'+[...el.classList].join('.')+' '+Math.round(b.left)+'-'+Math.round(b.right)+' pos='+getComputedStyle(el).position+' ox='+getComputedStyle(el).overflowX);}
 return [document.documentElement.scrollWidth, out.slice(0,60)]; }"""

def test_debug(open_context, shop, order_payload):
    call_command("add_staff", "rita", "--role", "reviewer", "--password", PASSWORDS["rita"])
    world = seed(shop, order_payload)
    page = open_context("en").new_page()
    log_in(page, lambda p, n: None, "x", "rita", PASSWORDS["rita"], "/admin/")
    for url in [f"/admin/payments/paymentrequest/{world.late['en'].pk}/change/", "/admin/", "/admin/payments/refund/1/change/", "/admin/payments/paymentrequest/?review=waiting"]:
        page.goto(url)
        page.set_viewport_size({"width": 390, "height": 844})
        print(url, page.evaluate(JS))
        print(url, page.evaluate("""() => [...document.querySelectorAll('td.original p, .staff-scroll, .inline-group')].map(p => [p.tagName, p.className, p.offsetParent && (p.offsetParent.tagName + '#' + p.offsetParent.id + '.' + p.offsetParent.className), Math.round(p.getBoundingClientRect().right), p.scrollWidth, getComputedStyle(p).position, getComputedStyle(p).overflowX])"""))
        page.screenshot(path=f"/tmp/dbg-{url.replace('/','_')}.png", full_page=True)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.screenshot(path=f"/tmp/dbg-wide-{url.replace('/','_')}.png", full_page=True)
