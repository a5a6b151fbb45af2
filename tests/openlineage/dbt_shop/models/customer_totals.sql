select
    customer_id,
    sum(amount) as total,
    count(*) as n_orders
from {{ ref('orders') }}
where status = 'paid'
group by customer_id
